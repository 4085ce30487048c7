from trimgate.cli import main

raise SystemExit(main())
