/*
 * Oribi::Query.parse: the loop of Rack::QueryParser#each_query_pair and the
 * body of parse_query / parse_nested_query, in C. lib/oribi/query_parser.rb
 * decides when it may run and turns ArgumentError into Rack's
 * InvalidParameterError, as each_query_pair's rescue does.
 */
#include <ruby.h>
#include <ruby/encoding.h>
#include <string.h>

#include "ruby/oribi.h"
#include "http/query.h"

static ID id_normalize_params, id_make_params;

/* Arguments of one parse, shared by the per-pair helpers. */
struct query_parse {
    VALUE parser, qs, params;
    const char *s;
    size_t len;
    int sep, nested;
};

static VALUE rack_error(const char *name)
{
    return rb_path2class(name);
}

NORETURN(static void raise_bad_escape(struct query_parse *q, const char *raw, size_t len));
static void raise_bad_escape(struct query_parse *q, const char *raw, size_t len)
{
    /* Built as Ruby's interpolation builds it, so a message quoting binary
     * bytes is binary, like Rack's. */
    VALUE msg = rb_utf8_str_new_cstr("invalid %-encoding (");
    rb_str_append(msg, rb_enc_str_new(raw, (long)len, rb_enc_get(q->qs)));
    rb_str_cat_cstr(msg, ")");
    rb_exc_raise(rb_exc_new_str(rack_error("Rack::QueryParser::InvalidParameterError"), msg));
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

/* parse_query's block: a repeated key collects its values in an Array. */
static void add_flat(VALUE params, VALUE k, VALUE v)
{
    VALUE cur = rb_hash_lookup(params, k);
    if (!RTEST(cur))
        rb_hash_aset(params, k, v);
    else if (rb_obj_class(cur) == rb_cArray)
        rb_ary_push(cur, v);
    else
        rb_hash_aset(params, k, rb_assoc_new(cur, v));
}

/* name[0..start) as Rack's name[0, start] makes it: a UTF-8 String. */
static VALUE slice(VALUE name, long start, long len)
{
    return rb_utf8_str_new(RSTRING_PTR(name) + start, len);
}

static void normalize_in_ruby(struct query_parse *q, VALUE k, VALUE v)
{
    rb_funcall(q->parser, id_normalize_params, 4, q->params, k, v, INT2FIX(0));
}

/* "k[]": params[k] ||= [], then << v. Another type is Rack's to report. */
static void add_to_array(struct query_parse *q, VALUE name, long start, VALUE v)
{
    VALUE k = slice(name, 0, start);
    VALUE cur = rb_hash_lookup(q->params, k);
    if (!RTEST(cur)) {
        cur = rb_ary_new();
        rb_hash_aset(q->params, k, cur);
    } else if (!rb_obj_is_kind_of(cur, rb_cArray)) {
        normalize_in_ruby(q, name, v);
        return;
    }
    rb_ary_push(cur, v);
}

/* "k[sub]": params[k] ||= make_params, then [sub] = v one level down. */
static void add_to_hash(struct query_parse *q, VALUE name, long start, VALUE v)
{
    VALUE k = slice(name, 0, start);
    VALUE cur = rb_hash_lookup(q->params, k);
    if (!RTEST(cur)) {
        cur = rb_funcall(q->parser, id_make_params, 0);
        rb_hash_aset(q->params, k, cur);
    } else if (!rb_obj_is_kind_of(cur, rb_obj_class(q->params))) {
        normalize_in_ruby(q, name, v);
        return;
    }
    rb_hash_aset(cur, slice(name, start + 1, RSTRING_LEN(name) - start - 2), v);
}

/* The bracket after the key is "[sub]" to its end, sub not empty and
 * free of brackets: one level of hash, no nesting rule involved. */
static int one_hash_level(const char *after, long alen)
{
    if (alen < 3 || after[alen - 1] != ']')
        return 0;
    for (long i = 1; i < alen - 1; i++)
        if (after[i] == '[' || after[i] == ']')
            return 0;
    return 1;
}

/*
 * _normalize_params(params, name, v, 0) for the names forms send most:
 * "k", "k[]" and "k[sub]". A name without '[' is stored as is (an empty
 * one dropped). The other two take the branches Rack's method takes for
 * them when name is ASCII (char and byte offsets agree), does not start
 * with '[' and the depth limit allows one level down (q->nested == 2).
 * Every other name, and every type conflict, goes to Rack's own method.
 */
static void add_nested(struct query_parse *q, VALUE k, VALUE v)
{
    const char *p = RSTRING_PTR(k);
    long len = RSTRING_LEN(k);
    const char *br = memchr(p, '[', (size_t)len);
    if (br == NULL) {
        if (len > 0)
            rb_hash_aset(q->params, k, v);
        return;
    }
    long start = br - p;
    if (q->nested < 2 || start == 0 || !rb_enc_str_asciionly_p(k)) {
        normalize_in_ruby(q, k, v);
    } else if (len - start == 2 && br[1] == ']') {
        add_to_array(q, k, start, v);
    } else if (one_hash_level(br, len - start)) {
        add_to_hash(q, k, start, v);
    } else {
        normalize_in_ruby(q, k, v);
    }
}

static void add_pair(struct query_parse *q, const char *piece, size_t len)
{
    const char *eq = memchr(piece, '=', len);
    size_t klen = eq ? (size_t)(eq - piece) : len;
    VALUE k = unescape(q, piece, klen);
    VALUE v = eq ? unescape(q, eq + 1, len - klen - 1) : Qnil;
    if (q->nested)
        add_nested(q, k, v);
    else
        add_flat(q->params, k, v);
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
    if ((long)q->len > bytesize_limit)
        raise_limit(rb_sprintf("total query size exceeds limit (%ld)", bytesize_limit));
    /* String#split raises on a broken string before any pair is read. */
    if (rb_enc_str_coderange(q->qs) == ENC_CODERANGE_BROKEN)
        rb_raise(rack_error("Rack::QueryParser::InvalidParameterError"), "invalid byte sequence in %s",
                 rb_enc_name(rb_enc_get(q->qs)));
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
 * parse(parser, qs, sep, params, nested, bytesize_limit, params_limit):
 * fills params from qs (nested: 0 parse_query, 1 parse_nested_query,
 * 2 the same with a depth limit of 2 or more) and returns true, or returns false at once when qs
 * is not a String this loop reads as Rack would (the caller then lets Rack
 * parse). The limits are Integers >= 1 (the caller checks).
 */
static VALUE query_parse(VALUE mod, VALUE parser, VALUE qs, VALUE sep, VALUE params, VALUE nested, VALUE bytesize_limit,
                         VALUE params_limit)
{
    if (!RB_TYPE_P(qs, T_STRING) || !byte_scannable(qs))
        return Qfalse;
    if (RSTRING_LEN(qs) == 0)
        return Qtrue;
    /* A frozen copy: Ruby code run for a nested name cannot change the
     * bytes this loop is reading. */
    VALUE frozen = rb_str_new_frozen(qs);
    struct query_parse q = {parser,       frozen,         params, RSTRING_PTR(frozen), (size_t)RSTRING_LEN(frozen),
                            NUM2INT(sep), NUM2INT(nested)};
    check_limits(&q, NUM2LONG(bytesize_limit), NUM2LONG(params_limit));
    size_t pos = 0;
    int more = 1;
    while (more) {
        size_t start = pos;
        size_t len = oribi_query_next_piece(q.s, q.len, &pos, q.sep, &more);
        if (len > 0)
            add_pair(&q, q.s + start, len);
    }
    RB_GC_GUARD(frozen);
    return Qtrue;
}

void Init_oribi_query_parser(VALUE mOribi)
{
    id_normalize_params = rb_intern("_normalize_params");
    id_make_params = rb_intern("make_params");
    VALUE m = rb_define_module_under(mOribi, "Query");
    rb_define_module_function(m, "parse", query_parse, 7);
}
