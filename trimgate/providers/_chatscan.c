/* trimgate.providers._chatscan: an OpenAI Chat Completions body sized from its bytes.
 *
 * Parsing a 2 MB history with orjson builds about 39,000 Python objects; the codec then
 * reads a few fields of each message and the trim drops most of them again. Building and
 * freeing those objects was most of the CPU of a trimmed request (bench/RESULTS.md). This
 * module reads the body once, validates it, and returns per message only what the codec's
 * decode would derive from it: its byte span, its role, its text bytes and its tool-call
 * ids. The kept messages go upstream as the bytes of their spans (openai_chat.decode_raw,
 * common.rebuild).
 *
 * It mirrors OpenAIChatCodec.decode for the common shapes only: string or null contents,
 * tool calls with string ids and a "function" object, string tool_call_ids. A valid
 * message of any other shape gets a row with role ROLE_PARSE, and the codec parses and
 * decodes that one message from its span; so the scanner never has to be right about a
 * rare shape. tests/providers/test_chatscan.py checks it against the parsed decode.
 * Such rows are given for: a key with a backslash escape in a message (it could spell a
 * key that matters) or a repeated key that the codec reads; content that is a list or
 * another non-string value; a role other than user, assistant, tool, system or developer
 * (legacy "function" included); legacy function calls, audio, tool calls without a
 * "function" object or with non-string arguments or names, ids with escapes.
 *
 * It returns None (the codec parses the whole body) when, from the 32nd message on, more
 * than a third of the messages read so far would have to be parsed (counted as it goes,
 * so that a body of such messages is given up early): parsing them one by one costs more
 * than the scan saves (bench: every message a content list, 9.4 ms against 6.1 for the
 * whole parse and decode of 2 MB). And it returns None for any input that is not valid
 * JSON, or that orjson might read differently: invalid UTF-8, lone surrogate escapes,
 * control characters in strings, numbers longer than 32 characters or with an exponent
 * from 100 (or below -9999), nesting deeper than MAX_DEPTH; for a top-level key with an
 * escape, a second "messages", or a message that is not an object.
 *
 * Only bytes are read, always within [start, end); nothing is kept between calls.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_DEPTH 128
#define MAX_NUMBER 32  /* orjson reads any such number (no exponent over 99) as a finite one */

/* ROLE_PARSE: a valid message of a shape sized by the codec's decode, which parses it */
enum { ROLE_USER = 0, ROLE_ASSISTANT = 1, ROLE_TOOL = 2, ROLE_SYSTEM = 3, ROLE_PARSE = 4 };
/* REENCODE: a key the codec reads may be given twice in the message (repeated, or one
 * spelled with escapes); trimgate reads the last value (as orjson does), and a provider's
 * parser might read the first, so the message goes upstream re-encoded from its parsed
 * form (one key each), not as its bytes. */
enum { HAS_CONTENT = 1, STRING_CONTENT = 2, REENCODE = 4 };

/* What a message's field held: absent, null, a string (its UTF-8 length), or another
 * value (a list, an object, a number, a boolean). */
enum { V_ABSENT = 0, V_NULL, V_STR, V_OTHER, V_OBJECT };  /* V_OBJECT: read member by member */

typedef struct {
    int kind;
    Py_ssize_t nbytes;    /* V_STR: UTF-8 bytes of the decoded string */
    Py_ssize_t start;     /* V_STR: offset of the first byte inside the quotes */
    Py_ssize_t len;       /* V_STR: raw length inside the quotes */
    int escaped;          /* V_STR: the raw string has a backslash */
} Field;

typedef struct {
    Py_ssize_t start, len;  /* the id's raw span, inside the quotes */
} Call;

typedef struct {
    const unsigned char *base, *p, *end;
    Call *calls;
    Py_ssize_t ncalls, cap;
    Py_ssize_t call_bytes;  /* names and arguments of the current message's calls */
    int calls_bad;          /* a call of a shape left to the parsed decode */
    int reencode;           /* the current message may give a key the codec reads twice */
    Py_ssize_t nparse;      /* ROLE_PARSE rows so far */
} Scan;

#define OK 0
#define NO -1  /* not valid, or not a shape handled here: the codec parses the body */

static inline void
skip_ws(Scan *s)
{
    while (s->p < s->end) {
        unsigned char c = *s->p;
        if (c != ' ' && c != '\n' && c != '\r' && c != '\t') {
            return;
        }
        s->p++;
    }
}

static inline int
expect(Scan *s, unsigned char c)
{
    skip_ws(s);
    if (s->p >= s->end || *s->p != c) {
        return NO;
    }
    s->p++;
    return OK;
}

static int
hex4(const unsigned char *p, unsigned int *out)
{
    unsigned int v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') {
            v |= (unsigned int)(c - '0');
        } else if (c >= 'a' && c <= 'f') {
            v |= (unsigned int)(c - 'a' + 10);
        } else if (c >= 'A' && c <= 'F') {
            v |= (unsigned int)(c - 'A' + 10);
        } else {
            return NO;
        }
    }
    *out = v;
    return OK;
}

/* The first byte at or after p that is a quote, a backslash, a control character or not
 * ASCII: sixteen bytes a step with SSE2 (every x86-64 has it), else eight with integer
 * arithmetic. It may stop early near the end; the caller handles bytes one by one there. */
#if defined(__SSE2__) && defined(__GNUC__) && !defined(TRIMGATE_SWAR)
#include <emmintrin.h>
static inline const unsigned char *
skip_plain(const unsigned char *p, const unsigned char *end)
{
    const __m128i quote = _mm_set1_epi8('"');
    const __m128i slash = _mm_set1_epi8('\\');
    const __m128i space = _mm_set1_epi8(0x20);
    while (end - p >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
        /* signed: bytes from 0x80 are negative, so "below a space" finds them too */
        __m128i special = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote),
                                                    _mm_cmpeq_epi8(x, slash)),
                                       _mm_cmplt_epi8(x, space));
        int mask = _mm_movemask_epi8(special);
        if (mask != 0) {
            return p + __builtin_ctz((unsigned int)mask);
        }
        p += 16;
    }
    return p;
}
#else
#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL
static inline const unsigned char *
skip_plain(const unsigned char *p, const unsigned char *end)
{
    while (end - p >= 8) {
        uint64_t x;
        memcpy(&x, p, 8);
        uint64_t quote = x ^ (ONES * '"');
        uint64_t slash = x ^ (ONES * '\\');
        /* a high bit for any zero byte of quote or slash, byte below 0x20 or from 0x80 */
        uint64_t special = ((quote - ONES) & ~quote) | ((slash - ONES) & ~slash)
                           | (x - ONES * 0x20) | x;
        if ((special & HIGHS) != 0) {
            return p;
        }
        p += 8;
    }
    return p;
}
#endif

/* A string, at its opening quote: validated, its decoded UTF-8 length counted. */
static int
scan_string(Scan *s, Field *f)
{
    const unsigned char *p = s->p + 1;
    const unsigned char *end = s->end;
    Py_ssize_t n = 0;
    int escaped = 0;
    f->start = p - s->base;
    for (;;) {
        const unsigned char *q = skip_plain(p, end);
        n += q - p;
        p = q;
        if (p >= end) {
            return NO;
        }
        unsigned char c = *p;
        if (c == '"') {
            break;
        }
        if (c == '\\') {
            escaped = 1;
            if (end - p < 2) {
                return NO;
            }
            switch (p[1]) {
            case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
                n += 1;
                p += 2;
                continue;
            case 'u':
                break;
            default:
                return NO;
            }
            unsigned int cp;
            if (end - p < 6 || hex4(p + 2, &cp) != OK) {
                return NO;
            }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned int lo;
                if (end - p < 12 || p[6] != '\\' || p[7] != 'u' || hex4(p + 8, &lo) != OK
                    || lo < 0xDC00 || lo > 0xDFFF) {
                    return NO;  /* a lone high surrogate: orjson refuses it */
                }
                n += 4;
                p += 12;
                continue;
            }
            if (cp >= 0xDC00 && cp <= 0xDFFF) {
                return NO;
            }
            n += cp < 0x80 ? 1 : cp < 0x800 ? 2 : 3;
            p += 6;
            continue;
        }
        if (c < 0x20) {
            return NO;
        }
        if (c < 0x80) {
            n++;
            p++;
            continue;
        }
        /* UTF-8 as RFC 3629 has it: no overlong forms, no surrogates, at most U+10FFFF */
        Py_ssize_t width;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) {
            width = 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            width = 3;
            if (c == 0xE0) {
                lo = 0xA0;
            } else if (c == 0xED) {
                hi = 0x9F;
            }
        } else if (c >= 0xF0 && c <= 0xF4) {
            width = 4;
            if (c == 0xF0) {
                lo = 0x90;
            } else if (c == 0xF4) {
                hi = 0x8F;
            }
        } else {
            return NO;
        }
        if (end - p < width || p[1] < lo || p[1] > hi) {
            return NO;
        }
        for (Py_ssize_t i = 2; i < width; i++) {
            if ((p[i] & 0xC0) != 0x80) {
                return NO;
            }
        }
        n += width;
        p += width;
    }
    f->kind = V_STR;
    f->len = (p - s->base) - f->start;
    f->nbytes = n;
    f->escaped = escaped;
    s->p = p + 1;
    return OK;
}

static int
scan_number(Scan *s)
{
    const unsigned char *p = s->p, *end = s->end, *start = s->p;
    if (p < end && *p == '-') {
        p++;
    }
    if (p >= end) {
        return NO;
    }
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') {
            p++;
        }
    } else {
        return NO;
    }
    if (p < end && *p == '.') {
        p++;
        const unsigned char *digits = p;
        while (p < end && *p >= '0' && *p <= '9') {
            p++;
        }
        if (p == digits) {
            return NO;
        }
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        int negative = p < end && *p == '-';
        if (p < end && (*p == '+' || *p == '-')) {
            p++;
        }
        const unsigned char *digits = p;
        while (p < end && *p >= '0' && *p <= '9') {
            p++;
        }
        /* below 10^-9999 orjson reads 0; from 10^100 on, a double may overflow (orjson
         * refuses an infinity) */
        if (p == digits || p - digits > (negative ? 4 : 2)) {
            return NO;
        }
    }
    if (p - start > MAX_NUMBER) {
        return NO;
    }
    s->p = p;
    return OK;
}

static int skip_value(Scan *s, int depth);

static int
literal(Scan *s, const char *word, Py_ssize_t n)
{
    if (s->end - s->p < n || memcmp(s->p, word, (size_t)n) != 0) {
        return NO;
    }
    s->p += n;
    return OK;
}

/* Any value, validated; f (may be NULL) learns its kind and, for a string, its size. */
static int
value(Scan *s, int depth, Field *f)
{
    skip_ws(s);
    if (s->p >= s->end) {
        return NO;
    }
    Field scratch;
    if (f == NULL) {
        f = &scratch;
    }
    switch (*s->p) {
    case '"':
        return scan_string(s, f);
    case 'n':
        f->kind = V_NULL;
        return literal(s, "null", 4);
    case 't':
        f->kind = V_OTHER;
        return literal(s, "true", 4);
    case 'f':
        f->kind = V_OTHER;
        return literal(s, "false", 5);
    case '{':
    case '[':
        f->kind = V_OTHER;
        return skip_value(s, depth);
    default:
        f->kind = V_OTHER;
        return scan_number(s);
    }
}

/* An object's members, from its opening brace: each key is passed to member(). */
typedef int (*Member)(Scan *s, const Field *key, int depth, void *state);

static int
members(Scan *s, int depth, Member member, void *state)
{
    if (depth > MAX_DEPTH) {
        return NO;
    }
    s->p++;  /* the brace */
    skip_ws(s);
    if (s->p < s->end && *s->p == '}') {
        s->p++;
        return OK;
    }
    for (;;) {
        skip_ws(s);
        Field key;
        if (s->p >= s->end || *s->p != '"' || scan_string(s, &key) != OK) {
            return NO;
        }
        if (expect(s, ':') != OK || member(s, &key, depth, state) != OK) {
            return NO;
        }
        skip_ws(s);
        if (s->p >= s->end) {
            return NO;
        }
        if (*s->p == '}') {
            s->p++;
            return OK;
        }
        if (*s->p != ',') {
            return NO;
        }
        s->p++;
    }
}

static int
skip_member(Scan *s, const Field *key, int depth, void *state)
{
    (void)key;
    (void)state;
    return value(s, depth + 1, NULL);
}

/* An array's elements, from its opening bracket: each is passed to element(), which
 * starts at the element (after any whitespace) and must consume it. */
typedef int (*Element)(Scan *s, int depth, void *state);

static int
elements(Scan *s, int depth, Element element, void *state)
{
    if (depth > MAX_DEPTH) {
        return NO;
    }
    s->p++;  /* the bracket */
    skip_ws(s);
    if (s->p < s->end && *s->p == ']') {
        s->p++;
        return OK;
    }
    for (;;) {
        skip_ws(s);
        if (element(s, depth, state) != OK) {
            return NO;
        }
        skip_ws(s);
        if (s->p >= s->end) {
            return NO;
        }
        if (*s->p == ']') {
            s->p++;
            return OK;
        }
        if (*s->p != ',') {
            return NO;
        }
        s->p++;
    }
}

static int
skip_element(Scan *s, int depth, void *state)
{
    (void)state;
    return value(s, depth + 1, NULL);
}

static int
skip_value(Scan *s, int depth)
{
    if (*s->p == '{') {
        return members(s, depth, skip_member, NULL);
    }
    return elements(s, depth, skip_element, NULL);
}

static inline int
key_is(const Scan *s, const Field *key, const char *name)
{
    size_t n = strlen(name);
    return (size_t)key->len == n && memcmp(s->base + key->start, name, n) == 0;
}

/* -- one tool call: {"id": "...", "function": {"name": "...", "arguments": "..."}} ---- */

typedef struct {
    Field name, arguments;
} Function;

static int
function_member(Scan *s, const Field *key, int depth, void *state)
{
    Function *fn = (Function *)state;
    Field *slot = NULL;
    if (key->escaped) {
        s->calls_bad = 1;  /* it may spell "name" or "arguments" */
        s->reencode = 1;
    }
    if (key_is(s, key, "name")) {
        slot = &fn->name;
    } else if (key_is(s, key, "arguments")) {
        slot = &fn->arguments;
    }
    if (slot == NULL) {
        return value(s, depth + 1, NULL);
    }
    if (slot->kind != V_ABSENT) {
        s->calls_bad = 1;  /* a repeated key: orjson keeps the last */
        s->reencode = 1;
    }
    return value(s, depth + 1, slot);
}

typedef struct {
    Field id;
    int function;  /* the kind of "function": V_OBJECT when it is an object */
    Function fn;
} CallState;

static int
call_member(Scan *s, const Field *key, int depth, void *state)
{
    CallState *call = (CallState *)state;
    if (key->escaped) {
        s->calls_bad = 1;  /* it may spell "id" or "function" */
        s->reencode = 1;
    }
    if (key_is(s, key, "id")) {
        if (call->id.kind != V_ABSENT) {
            s->calls_bad = 1;
            s->reencode = 1;
        }
        return value(s, depth + 1, &call->id);
    }
    if (key_is(s, key, "function")) {
        if (call->function != V_ABSENT) {
            s->calls_bad = 1;
            s->reencode = 1;
        }
        skip_ws(s);
        if (s->p < s->end && *s->p == '{') {
            call->function = V_OBJECT;
            memset(&call->fn, 0, sizeof(call->fn));
            return members(s, depth + 1, function_member, &call->fn);
        }
        Field f;
        if (value(s, depth + 1, &f) != OK) {
            return NO;
        }
        call->function = f.kind;
        return OK;
    }
    return value(s, depth + 1, NULL);
}

static int
add_call(Scan *s, const CallState *call)
{
    if (call->id.kind != V_STR || call->id.escaped || call->function != V_OBJECT) {
        s->calls_bad = 1;  /* no id, or the codec's "custom" / unknown-shape branch */
        return OK;
    }
    const Field *name = &call->fn.name, *args = &call->fn.arguments;
    if ((name->kind != V_STR && name->kind != V_NULL && name->kind != V_ABSENT)
        || (args->kind != V_STR && args->kind != V_NULL)) {
        s->calls_bad = 1;  /* sized as JSON, or "input" looked up: left to the codec */
        return OK;
    }
    s->call_bytes += (name->kind == V_STR ? name->nbytes : 0)
                     + (args->kind == V_STR ? args->nbytes : 0);
    if (s->ncalls == s->cap) {
        Py_ssize_t cap = s->cap ? s->cap * 2 : 16;
        Call *grown = PyMem_Realloc(s->calls, (size_t)cap * sizeof(Call));
        if (grown == NULL) {
            PyErr_NoMemory();
            return NO;
        }
        s->calls = grown;
        s->cap = cap;
    }
    s->calls[s->ncalls].start = call->id.start;
    s->calls[s->ncalls].len = call->id.len;
    s->ncalls++;
    return OK;
}

/* One element of the tool_calls array. */
static int
call_element(Scan *s, int depth, void *state)
{
    (void)state;
    if (s->p < s->end && *s->p == '{') {
        CallState call;
        memset(&call, 0, sizeof(call));
        if (members(s, depth + 1, call_member, &call) != OK) {
            return NO;
        }
        return add_call(s, &call);
    }
    s->calls_bad = 1;  /* a call that is not an object */
    return value(s, depth + 1, NULL);
}

/* -- one message ------------------------------------------------------------------- */

enum {
    F_ROLE, F_CONTENT, F_TOOL_CALLS, F_TOOL_CALL_ID, F_REFUSAL, F_REASONING_CONTENT,
    F_REASONING, F_AUDIO, F_FUNCTION_CALL, F_COUNT
};
static const char *const FIELD_NAMES[F_COUNT] = {
    "role", "content", "tool_calls", "tool_call_id", "refusal", "reasoning_content",
    "reasoning", "audio", "function_call",
};

typedef struct {
    Field f[F_COUNT];
} MessageState;

static int
message_member(Scan *s, const Field *key, int depth, void *state)
{
    MessageState *m = (MessageState *)state;
    if (key->escaped) {
        s->reencode = 1;  /* it may spell a key the codec reads */
        return value(s, depth + 1, NULL);
    }
    for (int i = 0; i < F_COUNT; i++) {
        if (!key_is(s, key, FIELD_NAMES[i])) {
            continue;
        }
        if (m->f[i].kind != V_ABSENT) {
            s->reencode = 1;  /* orjson keeps the last */
        }
        if (i == F_TOOL_CALLS) {
            skip_ws(s);
            if (s->p < s->end && *s->p == '[') {
                s->ncalls = 0;
                s->call_bytes = 0;
                s->calls_bad = 0;
                m->f[i].kind = V_OBJECT;  /* a list, read by call_element */
                return elements(s, depth + 1, call_element, NULL);
            }
        }
        return value(s, depth + 1, &m->f[i]);
    }
    return value(s, depth + 1, NULL);
}

static int
role_of(const Scan *s, const Field *role)
{
    if (role->kind != V_STR || role->escaped) {
        return NO;
    }
    static const struct { const char *name; int code; } roles[] = {
        {"user", ROLE_USER}, {"assistant", ROLE_ASSISTANT}, {"tool", ROLE_TOOL},
        {"system", ROLE_SYSTEM}, {"developer", ROLE_SYSTEM},
    };
    for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++) {
        if (key_is(s, role, roles[i].name)) {
            return roles[i].code;
        }
    }
    return NO;  /* "function" (legacy) or unknown: the codec decides */
}

static PyObject *
id_str(const Scan *s, Py_ssize_t start, Py_ssize_t len)
{
    return PyUnicode_DecodeUTF8((const char *)s->base + start, len, NULL);
}

/* A string-or-null field: its UTF-8 bytes, or NO for another kind. */
static inline Py_ssize_t
text_bytes(const Field *f)
{
    if (f->kind == V_STR) {
        return f->nbytes;
    }
    return f->kind == V_OTHER || f->kind == V_OBJECT ? NO : 0;
}

/* A tuple of the values (ints; ids: None or a tuple of str), stealing ids. Rows hold no
 * containers that could form a cycle, so the collector is not told about them: thousands
 * per request would otherwise trigger collections that find nothing. */
static PyObject *
row_of(Py_ssize_t start, Py_ssize_t end, int role, Py_ssize_t nbytes, int flags,
       PyObject *ids)
{
    PyObject *row = PyTuple_New(6);
    if (row == NULL) {
        Py_DECREF(ids);
        return NULL;
    }
    PyObject *values[5] = {
        PyLong_FromSsize_t(start), PyLong_FromSsize_t(end), PyLong_FromLong(role),
        PyLong_FromSsize_t(nbytes), PyLong_FromLong(flags),
    };
    PyTuple_SET_ITEM(row, 5, ids);
    int failed = 0;
    for (int i = 0; i < 5; i++) {
        failed |= values[i] == NULL;
        PyTuple_SET_ITEM(row, i, values[i] != NULL ? values[i] : Py_NewRef(Py_None));
    }
    if (failed) {
        Py_DECREF(row);
        return NULL;
    }
    if (PyTuple_CheckExact(ids)) {
        PyObject_GC_UnTrack(ids);
    }
    PyObject_GC_UnTrack(row);
    return row;
}

static PyObject *
parse_row(Scan *s, Py_ssize_t start, Py_ssize_t end)
{
    s->nparse++;
    return row_of(start, end, ROLE_PARSE, 0, s->reencode ? REENCODE : 0, Py_NewRef(Py_None));
}

/* Row: (start, end, role, text bytes, flags, ids), where a message of a shape not
 * sized here has role ROLE_PARSE (the codec parses and decodes that one); NULL: the
 * message is not valid JSON (no error set), or an error (set). */
static PyObject *
scan_message(Scan *s, int depth)
{
    Py_ssize_t start = s->p - s->base;
    MessageState m;
    memset(&m, 0, sizeof(m));
    s->ncalls = 0;
    s->call_bytes = 0;
    s->calls_bad = 0;
    s->reencode = 0;
    if (members(s, depth, message_member, &m) != OK) {
        return NULL;
    }
    /* From here on the message has been read whole and is valid: s->p is its end */
    Py_ssize_t end = s->p - s->base;
    /* a key the codec reads may be given twice: the item is parsed (and re-encoded) */
    int role = s->reencode ? NO : role_of(s, &m.f[F_ROLE]);
    if (role == NO) {
        return parse_row(s, start, end);
    }
    Py_ssize_t nbytes = text_bytes(&m.f[F_CONTENT]);
    if (nbytes == NO) {  /* a content list, or another value */
        return parse_row(s, start, end);
    }
    int flags = m.f[F_CONTENT].kind == V_STR ? STRING_CONTENT : 0;
    if (m.f[F_CONTENT].kind == V_STR && m.f[F_CONTENT].nbytes > 0) {
        flags |= HAS_CONTENT;
    }
    PyObject *ids = NULL;
    if (role == ROLE_ASSISTANT) {
        Py_ssize_t refusal = text_bytes(&m.f[F_REFUSAL]);
        Py_ssize_t reasoning = text_bytes(&m.f[F_REASONING_CONTENT]);
        Py_ssize_t reasoning2 = text_bytes(&m.f[F_REASONING]);
        int calls = m.f[F_TOOL_CALLS].kind;
        if (refusal == NO || reasoning == NO || reasoning2 == NO
            || (m.f[F_AUDIO].kind != V_ABSENT && m.f[F_AUDIO].kind != V_NULL)
            || (m.f[F_FUNCTION_CALL].kind != V_ABSENT && m.f[F_FUNCTION_CALL].kind != V_NULL)
            || (calls != V_ABSENT && calls != V_NULL && calls != V_OBJECT)
            || (calls == V_OBJECT && s->calls_bad)) {
            return parse_row(s, start, end);
        }
        if (refusal > 0) {
            flags |= HAS_CONTENT;
        }
        nbytes += refusal + reasoning + reasoning2;
        Py_ssize_t ncalls = calls == V_OBJECT ? s->ncalls : 0;
        nbytes += calls == V_OBJECT ? s->call_bytes : 0;
        ids = PyTuple_New(ncalls);
        if (ids == NULL) {
            return NULL;
        }
        for (Py_ssize_t i = 0; i < ncalls; i++) {
            PyObject *id = id_str(s, s->calls[i].start, s->calls[i].len);
            if (id == NULL) {
                Py_DECREF(ids);
                return NULL;
            }
            PyTuple_SET_ITEM(ids, i, id);
        }
    } else if (role == ROLE_TOOL) {
        const Field *id = &m.f[F_TOOL_CALL_ID];
        if (id->kind == V_STR && !id->escaped) {
            PyObject *one = id_str(s, id->start, id->len);
            if (one == NULL) {
                return NULL;
            }
            ids = PyTuple_Pack(1, one);
            Py_DECREF(one);
            if (ids == NULL) {
                return NULL;
            }
        } else if (id->kind == V_ABSENT || id->kind == V_NULL) {
            ids = Py_NewRef(Py_None);  /* an anonymous result */
        } else {
            return parse_row(s, start, end);
        }
    } else {
        ids = Py_NewRef(Py_None);
    }
    return row_of(start, end, role, nbytes, flags, ids);
}

/* One element of the messages array, its row appended to rows (a list). */
static int
message_element(Scan *s, int depth, void *state)
{
    PyObject *rows = (PyObject *)state;
    if (s->p >= s->end || *s->p != '{') {
        return NO;  /* a message that is not an object: the codec refuses it */
    }
    PyObject *row = scan_message(s, depth + 1);
    if (row == NULL) {
        return NO;
    }
    int failed = PyList_Append(rows, row);
    Py_DECREF(row);
    if (failed) {
        return NO;
    }
    /* Parsing many items one by one costs more than parsing the body whole (and a
     * third of them, more than the scan saves): then the codec parses it whole. From
     * the 32nd message on, so that a few at the start do not decide. */
    Py_ssize_t nrows = PyList_GET_SIZE(rows);
    if (nrows >= 32 && s->nparse * 3 > nrows) {
        return NO;
    }
    return OK;
}

typedef struct {
    Py_ssize_t start, end;
    PyObject *rows;
} TopState;

static int
top_member(Scan *s, const Field *key, int depth, void *state)
{
    TopState *top = (TopState *)state;
    if (key->escaped) {
        return NO;
    }
    if (!key_is(s, key, "messages")) {
        return value(s, depth + 1, NULL);
    }
    skip_ws(s);
    if (top->rows != NULL || s->p >= s->end || *s->p != '[') {
        return NO;  /* a second "messages", or one that is not a list */
    }
    top->start = s->p - s->base;
    top->rows = PyList_New(0);
    if (top->rows == NULL || elements(s, depth + 1, message_element, top->rows) != OK) {
        return NO;  /* scan() frees the rows */
    }
    top->end = s->p - s->base;
    return OK;
}

static PyObject *
scan(PyObject *module, PyObject *arg)
{
    (void)module;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) != 0) {
        return NULL;
    }
    Scan s = {
        .base = (const unsigned char *)view.buf,
        .p = (const unsigned char *)view.buf,
        .end = (const unsigned char *)view.buf + view.len,
    };
    TopState top = {0, 0, NULL};
    skip_ws(&s);
    int ok = s.p < s.end && *s.p == '{' && members(&s, 0, top_member, &top) == OK;
    if (ok) {
        skip_ws(&s);
        ok = s.p == s.end && top.rows != NULL;
    }
    PyMem_Free(s.calls);
    PyBuffer_Release(&view);
    if (PyErr_Occurred()) {  /* out of memory: not an answer about the body */
        Py_XDECREF(top.rows);
        return NULL;
    }
    if (!ok) {
        Py_XDECREF(top.rows);
        Py_RETURN_NONE;
    }
    return Py_BuildValue("(nnN)", top.start, top.end, top.rows);
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_O,
     "scan(body) -> (start, end, rows) | None: an OpenAI chat body's messages sized from "
     "its bytes; rows are (start, end, role, text_bytes, flags, ids). None: parse it."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_chatscan", NULL, -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__chatscan(void)
{
    return PyModule_Create(&module);
}
