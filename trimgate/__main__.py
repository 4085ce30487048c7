from trimgate.cli import main

if __name__ == "__main__":  # not when a worker process starts (spawn imports it)
    raise SystemExit(main())
