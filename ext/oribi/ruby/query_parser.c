/*
 * Oribi::Query.parse: Rack::QueryParser#parse_query and #parse_nested_query
 * in C, the pair loop and the nested-name walk (_normalize_params) both.
 * lib/oribi/query_parser.rb decides when it may run and which Rack it
 * mirrors (the flags below); ext/oribi/http/query.c splits and decodes.
 */
#include <ruby.h>
#include <ruby/encoding.h>
#include <string.h>

#include "ruby/oribi.h"
#include "http/query.h"

/* What the caller asks for, and how the loaded Rack behaves. */
enum {
    QUERY_NESTED = 1,        /* parse_nested_query, else parse_query */
    QUERY_PARAMS_HASH = 2,   /* Params < Hash (3.2): nested hashes are Params, else plain Hashes */
    QUERY_WRAP_FLAT = 4,     /* parse_query's ArgumentError becomes InvalidParameterError (3.2) */
    QUERY_SIZE_IN_LIMIT = 8, /* "total query size (N) exceeds limit (L)" (3.0, 3.2.0) */
    QUERY_PAIRS = 16,        /* parse_query_pairs: [[k, v], ...] (3.2) */
    QUERY_BARE_ERRORS = 32,  /* normalize_params: no rescue turns ArgumentError into Rack's */
};

/* Arguments of one parse, shared by the per-pair helpers. */
struct query_parse {
    VALUE qs, params, params_class;
    const char *s;
    size_t len;
    int sep, flags;
    long depth_limit;
};

static VALUE rack_error(const char *name)
{
    return rb_path2class(name);
}

/* The class each_query_pair's rescue turns an ArgumentError into (parse_nested_query always,
 * parse_query in Rack 3.2), else ArgumentError itself. */
static VALUE argument_error_class(struct query_parse *q)
{
    if (q->flags & QUERY_BARE_ERRORS)
        return rb_eArgError;
    if (q->flags & (QUERY_NESTED | QUERY_WRAP_FLAT | QUERY_PAIRS))
        return rack_error("Rack::QueryParser::InvalidParameterError");
    return rb_eArgError;
}

/* What String#split, #count and Regexp#match? raise on a broken String. */
NORETURN(static void raise_broken(struct query_parse *q, VALUE str));
static void raise_broken(struct query_parse *q, VALUE str)
{
    rb_raise(argument_error_class(q), "invalid byte sequence in %s", rb_enc_name(rb_enc_get(str)));
}

NORETURN(static void raise_bad_escape(struct query_parse *q, const char *raw, size_t len));
static void raise_bad_escape(struct query_parse *q, const char *raw, size_t len)
{
    /* Built as Ruby's interpolation builds it, so a message quoting binary
     * bytes is binary, like Rack's. */
    VALUE msg = rb_utf8_str_new_cstr("invalid %-encoding (");
    rb_str_append(msg, rb_enc_str_new(raw, (long)len, rb_enc_get(q->qs)));
    rb_str_cat_cstr(msg, ")");
    rb_exc_raise(rb_exc_new_str(argument_error_class(q), msg));
}

/* Rack unescapes into a new UTF-8 String whatever the query's encoding. */
static VALUE unescape(struct query_parse *q, const char *raw, size_t len)
{
    VALUE str = rb_utf8_str_new(NULL, (long)len);
    size_t n = oribi_query_decode(raw, len, RSTRING_PTR(str));
    if (n == ORIBI_QUERY_BAD_ESCAPE)
        raise_bad_escape(q, raw, len);
    rb_str_set_len(str, (long)n);
    return str;
}

/*
 * params[k] = v for a key String made here: frozen first, as Hash#[]=
 * would store it, but without interning it (a lookup in Ruby's table of
 * frozen Strings per key: a third of the time of a short query).
 */
static void aset(VALUE params, VALUE k, VALUE v)
{
    rb_hash_aset(params, rb_obj_freeze(k), v);
}

/* parse_query's block: a repeated key collects its values in an Array. */
static void add_flat(VALUE params, VALUE k, VALUE v)
{
    VALUE cur = rb_hash_lookup(params, k);
    if (!RTEST(cur))
        aset(params, k, v);
    else if (rb_obj_class(cur) == rb_cArray)
        rb_ary_push(cur, v);
    else
        aset(params, k, rb_assoc_new(cur, v));
}

/*
 * The nested-name walk. A name at some depth is a byte range of the
 * unescaped key (a UTF-8 String). Rack's String#index, #[] and
 * #start_with? count characters, but every byte they look for is ASCII,
 * which in UTF-8 (broken or not) is always a character of its own, so
 * byte offsets find and cut the same pieces. Pointers into the key are
 * taken afresh after anything that may allocate.
 */
struct name {
    VALUE str;
    long off, len;
};

static const char *name_ptr(struct name n)
{
    return RSTRING_PTR(n.str) + n.off;
}

static struct name sub(struct name n, long off, long len)
{
    return (struct name){n.str, n.off + off, len};
}

static VALUE name_str(struct name n)
{
    if (n.off == 0 && n.len == RSTRING_LEN(n.str))
        return n.str;
    return rb_utf8_str_new(name_ptr(n), n.len);
}

static int name_is(struct name n, const char *lit)
{
    long l = (long)strlen(lit);
    return n.len == l && memcmp(name_ptr(n), lit, (size_t)l) == 0;
}

static long name_index(struct name n, char c, long from)
{
    if (from >= n.len)
        return -1;
    const char *p = name_ptr(n), *hit = memchr(p + from, c, (size_t)(n.len - from));
    return hit ? hit - p : -1;
}

/* make_params: a Params (Rack 3.2, a Hash subclass) or, where Params is
 * not a Hash (3.0, 3.1), the plain Hash its to_h would turn it into. */
static VALUE make_params(struct query_parse *q)
{
    return q->flags & QUERY_PARAMS_HASH ? rb_obj_alloc(q->params_class) : rb_hash_new();
}

/* params_hash_type?: kind_of?(Params) where Params is a Hash (3.2); where
 * it is not, the plain Hashes this walk makes stand for Params. */
static int params_hash_p(struct query_parse *q, VALUE obj)
{
    if (q->flags & QUERY_PARAMS_HASH)
        return RB_TYPE_P(obj, T_HASH) && RTEST(rb_obj_is_kind_of(obj, q->params_class));
    return RB_TYPE_P(obj, T_HASH);
}

NORETURN(static void raise_type(struct query_parse *q, const char *expected, VALUE got, VALUE k));
static void raise_type(struct query_parse *q, const char *expected, VALUE got, VALUE k)
{
    VALUE cls = !(q->flags & QUERY_PARAMS_HASH) && RB_TYPE_P(got, T_HASH) ? q->params_class : rb_obj_class(got);
    VALUE msg = rb_sprintf("expected %s (got %" PRIsVALUE ") for param `", expected, rb_class_name(cls));
    rb_enc_associate(msg, rb_utf8_encoding());
    rb_str_append(msg, k);
    rb_str_cat_cstr(msg, "'");
    rb_exc_raise(rb_exc_new_str(rack_error("Rack::QueryParser::ParameterTypeError"), msg));
}

/* params[k] ||= []; then it must be an Array. */
static VALUE fetch_array(struct query_parse *q, VALUE params, VALUE k)
{
    VALUE cur = rb_hash_lookup(params, k);
    if (!RTEST(cur)) {
        cur = rb_ary_new();
        aset(params, k, cur);
    } else if (!RB_TYPE_P(cur, T_ARRAY)) {
        raise_type(q, "Array", cur, k);
    }
    return cur;
}

/* params_hash_has_key?(hash, key): key split at runs of brackets names a
 * path of Params through hash; a key with "[]" never does. */
static int has_key(struct query_parse *q, VALUE hash, struct name key)
{
    VALUE str = rb_utf8_str_new(name_ptr(key), key.len);
    /* Its regexps raise on a broken key before anything else. */
    if (rb_enc_str_coderange(str) == ENC_CODERANGE_BROKEN)
        raise_broken(q, str);
    const char *p = RSTRING_PTR(str);
    long len = RSTRING_LEN(str);
    for (long i = 0; i + 1 < len; i++)
        if (p[i] == '[' && p[i + 1] == ']')
            return 0;
    VALUE h = hash;
    for (long i = 0; i < len;) {
        while (i < len && (p[i] == '[' || p[i] == ']'))
            i++;
        long start = i;
        while (i < len && p[i] != '[' && p[i] != ']')
            i++;
        if (i == start)
            continue;
        if (!params_hash_p(q, h))
            return 0;
        VALUE v = rb_hash_lookup2(h, rb_utf8_str_new(p + start, i - start), Qundef);
        p = RSTRING_PTR(str);
        if (v == Qundef)
            return 0;
        h = v;
    }
    RB_GC_GUARD(str);
    return 1;
}

static VALUE normalize(struct query_parse *q, VALUE params, struct name name, VALUE v, long depth);

/* "k[]..." past "[]": x[][y] adds y to the last Hash of the Array while it
 * has no y yet, else starts a new one; anything else nests as it comes. */
static void normalize_array_child(struct query_parse *q, VALUE params, VALUE k, struct name after, VALUE v, long depth)
{
    struct name child = sub(after, 2, after.len - 2);
    const char *a = name_ptr(after);
    if (after.len >= 5 && a[2] == '[' && a[after.len - 1] == ']') {
        struct name inner = sub(after, 3, after.len - 4);
        if (name_index(inner, '[', 0) < 0 && name_index(inner, ']', 0) < 0)
            child = inner;
    }
    VALUE arr = fetch_array(q, params, k);
    long n = RARRAY_LEN(arr);
    VALUE last = n > 0 ? RARRAY_AREF(arr, n - 1) : Qnil;
    if (params_hash_p(q, last) && !has_key(q, last, child))
        normalize(q, last, child, v, depth + 1);
    else
        rb_ary_push(arr, normalize(q, make_params(q), child, v, depth + 1));
}

/* Rack::QueryParser#_normalize_params(params, name, v, depth), branch for
 * branch, with the same return value (params, [v] or nil). */
static VALUE normalize(struct query_parse *q, VALUE params, struct name name, VALUE v, long depth)
{
    if (depth >= q->depth_limit)
        rb_exc_raise(rb_class_new_instance(0, NULL, rack_error("Rack::QueryParser::ParamsTooDeepError")));
    struct name k = name, after = sub(name, name.len, 0);
    long start;
    int k_is_array = 0;
    if (depth == 0) {
        /* Start of parsing: a '[' at the start is part of the key. */
        if ((start = name_index(name, '[', 1)) >= 0) {
            k = sub(name, 0, start);
            after = sub(name, start, name.len - start);
        }
    } else if (name.len >= 2 && name_ptr(name)[0] == '[' && name_ptr(name)[1] == ']') {
        k_is_array = 1;
        after = sub(name, 2, name.len - 2);
    } else if (name.len >= 1 && name_ptr(name)[0] == '[' && (start = name_index(name, ']', 1)) >= 0) {
        k = sub(name, 1, start - 1);
        after = sub(name, start + 1, name.len - start - 1);
    }
    if (!k_is_array && k.len == 0)
        return Qnil;
    VALUE kstr = k_is_array ? rb_utf8_str_new("[]", 2) : name_str(k);
    if (after.len == 0) {
        if (k_is_array && depth != 0)
            return rb_ary_new_from_args(1, v);
        aset(params, kstr, v);
    } else if (name_is(after, "[")) {
        aset(params, name_str(name), v);
    } else if (name_is(after, "[]")) {
        rb_ary_push(fetch_array(q, params, kstr), v);
    } else if (after.len >= 2 && name_ptr(after)[0] == '[' && name_ptr(after)[1] == ']') {
        normalize_array_child(q, params, kstr, after, v, depth);
    } else {
        VALUE cur = rb_hash_lookup(params, kstr);
        if (!RTEST(cur)) {
            cur = make_params(q);
            aset(params, kstr, cur);
        } else if (!params_hash_p(q, cur)) {
            raise_type(q, "Hash", cur, kstr);
        }
        aset(params, kstr, normalize(q, cur, after, v, depth + 1));
    }
    return params;
}

static void add_pair(struct query_parse *q, const char *piece, size_t len)
{
    const char *eq = memchr(piece, '=', len);
    size_t klen = eq ? (size_t)(eq - piece) : len;
    VALUE k = unescape(q, piece, klen);
    VALUE v = eq ? unescape(q, eq + 1, len - klen - 1) : Qnil;
    if (q->flags & QUERY_PAIRS)
        rb_ary_push(q->params, rb_assoc_new(k, v));
    else if (q->flags & QUERY_NESTED)
        normalize(q, q->params, (struct name){k, 0, RSTRING_LEN(k)}, v, 0);
    else
        add_flat(q->params, k, v);
    RB_GC_GUARD(k);
}

/* Rack's limit messages are interpolated in UTF-8 source: UTF-8 Strings. */
NORETURN(static void raise_limit(VALUE msg));
static void raise_limit(VALUE msg)
{
    rb_enc_associate(msg, rb_utf8_encoding());
    rb_exc_raise(rb_exc_new_str(rack_error("Rack::QueryParser::QueryLimitError"), msg));
}

static void check_limits(struct query_parse *q, long bytesize_limit, long params_limit)
{
    if ((long)q->len > bytesize_limit) {
        if (q->flags & QUERY_SIZE_IN_LIMIT)
            raise_limit(rb_sprintf("total query size (%zu) exceeds limit (%ld)", q->len, bytesize_limit));
        raise_limit(rb_sprintf("total query size exceeds limit (%ld)", bytesize_limit));
    }
    /* String#split (3.2) and #count (3.0, 3.1) raise on a broken string
     * before any pair is read. */
    if (rb_enc_str_coderange(q->qs) == ENC_CODERANGE_BROKEN)
        raise_broken(q, q->qs);
    size_t seps = oribi_query_count_seps(q->s, q->len, q->sep);
    if (seps >= (size_t)params_limit)
        raise_limit(rb_sprintf("total number of query parameters (%zu) exceeds limit (%ld)", seps + 1, params_limit));
}

/* Only the encodings whose bytes below 0x80 are always ASCII characters:
 * there a byte scan splits where Rack's character-wise split does. */
static int byte_scannable(VALUE qs)
{
    int idx = ENCODING_GET(qs);
    return idx == rb_utf8_encindex() || idx == rb_ascii8bit_encindex() || idx == rb_usascii_encindex();
}

/*
 * parse(qs, sep, flags, params_class, depth_limit, bytesize_limit,
 * params_limit): what parse_query or parse_nested_query (flags) returns for
 * qs, or false at once when qs is not a String this loop reads as Rack
 * would (the caller then lets Rack parse). The limits are Integers >= 1
 * (the caller checks); the depth limit is small enough for C recursion.
 */
static VALUE query_parse(VALUE mod, VALUE qs, VALUE sep, VALUE flags, VALUE params_class, VALUE depth_limit,
                         VALUE bytesize_limit, VALUE params_limit)
{
    if (!RB_TYPE_P(qs, T_STRING) || !byte_scannable(qs))
        return Qfalse;
    VALUE params = NUM2INT(flags) & QUERY_PAIRS ? rb_ary_new() : rb_hash_new();
    if (RSTRING_LEN(qs) == 0)
        return params;
    /* No Ruby code runs and the GVL is held until this returns, so the
     * bytes of qs cannot change under the loop; qs, on this stack, is
     * pinned against compaction. */
    struct query_parse q = {
        qs,           params,         params_class,         RSTRING_PTR(qs), (size_t)RSTRING_LEN(qs),
        NUM2INT(sep), NUM2INT(flags), NUM2LONG(depth_limit)};
    check_limits(&q, NUM2LONG(bytesize_limit), NUM2LONG(params_limit));
    size_t pos = 0;
    int more = 1;
    while (more) {
        size_t start = pos;
        size_t len = oribi_query_next_piece(q.s, q.len, &pos, q.sep, &more);
        if (len > 0)
            add_pair(&q, q.s + start, len);
    }
    RB_GC_GUARD(qs);
    return params;
}

/*
 * normalize(params, name, v, flags, params_class, depth_limit): Rack's
 * normalize_params(params, name, v) (what Rack::Request#POST runs for each
 * form pair) on a Params, for a UTF-8 name; returns params. The caller
 * checks the types.
 */
static VALUE query_normalize(VALUE mod, VALUE params, VALUE name, VALUE v, VALUE flags, VALUE params_class,
                             VALUE depth_limit)
{
    struct query_parse q = {
        name, params, params_class, NULL, 0, 0, NUM2INT(flags) | QUERY_BARE_ERRORS, NUM2LONG(depth_limit)};
    /* A copy: the walk freezes the name it stores as a key, and this one
     * is the caller's (Rack::Request keeps the form's pairs). */
    VALUE own = rb_str_dup(name);
    VALUE ret = normalize(&q, params, (struct name){own, 0, RSTRING_LEN(own)}, v, 0);
    RB_GC_GUARD(own);
    return ret;
}

void Init_oribi_query_parser(VALUE mOribi)
{
    VALUE m = rb_define_module_under(mOribi, "Query");
    rb_define_module_function(m, "parse", query_parse, 7);
    rb_define_module_function(m, "normalize", query_normalize, 6);
    rb_define_const(m, "PAIRS", INT2FIX(QUERY_PAIRS));
    rb_define_const(m, "NESTED", INT2FIX(QUERY_NESTED));
    rb_define_const(m, "PARAMS_HASH", INT2FIX(QUERY_PARAMS_HASH));
    rb_define_const(m, "WRAP_FLAT", INT2FIX(QUERY_WRAP_FLAT));
    rb_define_const(m, "SIZE_IN_LIMIT", INT2FIX(QUERY_SIZE_IN_LIMIT));
}
