/*
 * Oribi::Parser: the C parsers and chunked decoder seen from Ruby, for tests
 * and for turning fuzz findings into regression cases, and for the Ruby
 * parts that speak HTTP (the control endpoint and `oribi ctl`). The server
 * itself calls the C functions directly and never goes through here.
 */
#include <arpa/inet.h>
#include <sys/socket.h>

#include "ruby/oribi.h"
#include "http/parser.h"
#include "http/chunked.h"
#include "http/proxy_protocol.h"

static VALUE sym(const char *name)
{
    return ID2SYM(rb_intern(name));
}

static VALUE bytes(const char *p, size_t n)
{
    return rb_str_new(p, (long)n);
}

/* [[name, value], ...] of a parsed head. */
static VALUE header_pairs(const struct oribi_header *headers, size_t n)
{
    VALUE pairs = rb_ary_new_capa((long)n);
    for (size_t i = 0; i < n; i++)
        rb_ary_push(pairs, rb_assoc_new(bytes(headers[i].name, headers[i].name_len),
                                        bytes(headers[i].value, headers[i].value_len)));
    return pairs;
}

static size_t limit_arg(VALUE v, size_t dflt)
{
    return NIL_P(v) ? dflt : NUM2SIZET(v);
}

/* Oribi::Parser.parse(str, last_len = 0, max_request_line: nil,
 *                     max_header_bytes: nil, max_headers: nil) -> Hash */
static VALUE parser_parse(int argc, VALUE *argv, VALUE self)
{
    static ID kw_ids[3];
    VALUE str, last, opts, kw[3] = {Qundef, Qundef, Qundef}, h, tmp = 0;
    struct oribi_limits lim;
    struct oribi_request req;
    struct oribi_header *headers;
    size_t last_len;
    int r;

    if (!kw_ids[0]) {
        kw_ids[0] = rb_intern("max_request_line");
        kw_ids[1] = rb_intern("max_header_bytes");
        kw_ids[2] = rb_intern("max_headers");
    }
    rb_scan_args(argc, argv, "11:", &str, &last, &opts);
    StringValue(str);
    if (!NIL_P(opts))
        rb_get_kwargs(opts, kw_ids, 0, 3, kw);
    for (int i = 0; i < 3; i++)
        if (kw[i] == Qundef)
            kw[i] = Qnil;
    lim.max_request_line = limit_arg(kw[0], ORIBI_DEFAULT_MAX_REQUEST_LINE);
    lim.max_header_bytes = limit_arg(kw[1], ORIBI_DEFAULT_MAX_HEADER_BYTES);
    lim.max_headers = limit_arg(kw[2], ORIBI_DEFAULT_MAX_HEADERS);
    last_len = NIL_P(last) ? 0 : NUM2SIZET(last);
    if (last_len > (size_t)RSTRING_LEN(str))
        rb_raise(rb_eArgError, "last_len is past the end of the string");

    /* one slot more than the limit, so the limit and not the array decides */
    if (lim.max_headers > 65536)
        rb_raise(rb_eArgError, "max_headers is too large");
    headers = ALLOCV_N(struct oribi_header, tmp, lim.max_headers + 1);
    memset(&req, 0, sizeof(req));
    req.headers = headers;
    req.num_headers = lim.max_headers + 1;
    r = oribi_parse_request(RSTRING_PTR(str), (size_t)RSTRING_LEN(str), last_len, &req, &lim);

    h = rb_hash_new();
    if (r == ORIBI_PARSE_INCOMPLETE) {
        rb_hash_aset(h, sym("incomplete"), Qtrue);
    } else if (r == ORIBI_PARSE_ERROR) {
        rb_hash_aset(h, sym("error"), INT2NUM(req.status));
        if (req.status == 417) { /* the connection may go on: how far, and whether */
            rb_hash_aset(h, sym("consumed"), SIZET2NUM(req.head_len));
            rb_hash_aset(h, sym("keepalive"), req.keepalive ? Qtrue : Qfalse);
        }
    } else {
        rb_hash_aset(h, sym("consumed"), INT2NUM(r));
        rb_hash_aset(h, sym("method"), bytes(req.method, req.method_len));
        rb_hash_aset(h, sym("target"), bytes(req.target, req.target_len));
        rb_hash_aset(h, sym("path"), bytes(req.path, req.path_len));
        rb_hash_aset(h, sym("minor_version"), INT2NUM(req.minor_version));
        rb_hash_aset(h, sym("headers"), header_pairs(headers, req.num_headers));
        rb_hash_aset(h, sym("host"), req.host ? bytes(req.host, req.host_len) : Qnil);
        rb_hash_aset(h, sym("content_length"), req.content_length < 0 ? Qnil : LL2NUM(req.content_length));
        rb_hash_aset(h, sym("chunked"), req.chunked ? Qtrue : Qfalse);
        rb_hash_aset(h, sym("keepalive"), req.keepalive ? Qtrue : Qfalse);
        rb_hash_aset(h, sym("expect_continue"), req.expect_continue ? Qtrue : Qfalse);
        rb_hash_aset(h, sym("upgrade"), req.upgrade ? Qtrue : Qfalse);
    }
    ALLOCV_END(tmp);
    RB_GC_GUARD(str);
    return h;
}

static VALUE framing_sym(int framing)
{
    switch (framing) {
    case ORIBI_FRAMING_NONE:
        return sym("none");
    case ORIBI_FRAMING_LENGTH:
        return sym("length");
    case ORIBI_FRAMING_CHUNKED:
        return sym("chunked");
    default:
        return sym("until_close");
    }
}

/* Oribi::Parser.parse_response(str, head: false) -> Hash: {incomplete: true},
 * {error: true}, or the head: consumed, status, reason, minor_version,
 * headers ([[name, value], ...], at most DEFAULT_MAX_HEADERS),
 * content_length, framing (:none, :length, :chunked, :until_close) and
 * keepalive. head: the request was HEAD. */
static VALUE parser_parse_response(int argc, VALUE *argv, VALUE self)
{
    static ID kw_head;
    VALUE str, opts, head = Qfalse, h = rb_hash_new();
    struct oribi_header headers[ORIBI_DEFAULT_MAX_HEADERS];
    struct oribi_response_head res;
    int r;

    if (!kw_head)
        kw_head = rb_intern("head");
    rb_scan_args(argc, argv, "1:", &str, &opts);
    StringValue(str);
    if (!NIL_P(opts)) {
        rb_get_kwargs(opts, &kw_head, 0, 1, &head);
        if (head == Qundef)
            head = Qfalse;
    }
    memset(&res, 0, sizeof(res));
    res.headers = headers;
    res.num_headers = ORIBI_DEFAULT_MAX_HEADERS;
    r = oribi_parse_response(RSTRING_PTR(str), (size_t)RSTRING_LEN(str), RTEST(head), &res);
    if (r == ORIBI_PARSE_INCOMPLETE) {
        rb_hash_aset(h, sym("incomplete"), Qtrue);
    } else if (r == ORIBI_PARSE_ERROR) {
        rb_hash_aset(h, sym("error"), Qtrue);
    } else {
        rb_hash_aset(h, sym("consumed"), INT2NUM(r));
        rb_hash_aset(h, sym("status"), INT2NUM(res.status));
        rb_hash_aset(h, sym("reason"), bytes(res.reason, res.reason_len));
        rb_hash_aset(h, sym("minor_version"), INT2NUM(res.minor_version));
        rb_hash_aset(h, sym("headers"), header_pairs(headers, res.num_headers));
        rb_hash_aset(h, sym("content_length"), res.content_length < 0 ? Qnil : LL2NUM(res.content_length));
        rb_hash_aset(h, sym("framing"), framing_sym(res.framing));
        rb_hash_aset(h, sym("keepalive"), res.keepalive ? Qtrue : Qfalse);
    }
    RB_GC_GUARD(str);
    return h;
}

/* Oribi::Parser.decode_chunked(str or [piece, ...]) -> Hash. Pieces go
 * through one decoder one after the other, as reads from a socket would. */
static VALUE parser_decode_chunked(VALUE self, VALUE input)
{
    struct oribi_chunked_decoder d;
    VALUE pieces, body = rb_str_new(NULL, 0), h = rb_hash_new(), work;
    long total = 0;

    pieces = RB_TYPE_P(input, T_ARRAY) ? input : rb_ary_new_from_args(1, input);
    for (long i = 0; i < RARRAY_LEN(pieces); i++) {
        VALUE piece = RARRAY_AREF(pieces, i);
        StringValue(piece);
        total += RSTRING_LEN(piece);
    }
    work = rb_str_new(NULL, total);
    memset(&d, 0, sizeof(d));

    for (long i = 0; i < RARRAY_LEN(pieces); i++) {
        VALUE piece = RARRAY_AREF(pieces, i);
        size_t n;
        ssize_t r;
        StringValue(piece);
        n = (size_t)RSTRING_LEN(piece);
        /* the decoder consumes all it is given, so each piece starts afresh */
        memcpy(RSTRING_PTR(work), RSTRING_PTR(piece), n);
        r = oribi_decode_chunked(&d, RSTRING_PTR(work), &n);
        if (r == ORIBI_CHUNKED_ERROR) {
            rb_hash_aset(h, sym("error"), Qtrue);
            return h;
        }
        rb_str_cat(body, RSTRING_PTR(work), (long)n);
        if (r >= 0) {
            /* the pieces not fed yet follow the body just as well */
            VALUE rest = rb_str_new(RSTRING_PTR(work) + n, (long)r);
            while (++i < RARRAY_LEN(pieces))
                rb_str_append(rest, RARRAY_AREF(pieces, i));
            rb_hash_aset(h, sym("body"), body);
            rb_hash_aset(h, sym("rest"), rest);
            return h;
        }
    }
    rb_hash_aset(h, sym("incomplete"), Qtrue);
    rb_hash_aset(h, sym("body"), body);
    return h;
}

/* Oribi::Parser.discard_chunked(str or [piece, ...]) -> Hash: the decoder in
 * discard mode, as the load generator runs it. {data_bytes:, rest:} when the
 * body ends, {incomplete: true, data_bytes:} or {error: true}. */
static VALUE parser_discard_chunked(VALUE self, VALUE input)
{
    struct oribi_chunked_decoder d;
    VALUE pieces = RB_TYPE_P(input, T_ARRAY) ? input : rb_ary_new_from_args(1, input);
    VALUE h = rb_hash_new();
    size_t total = 0;

    memset(&d, 0, sizeof(d));
    for (long i = 0; i < RARRAY_LEN(pieces); i++) {
        VALUE piece = RARRAY_AREF(pieces, i);
        size_t data;
        ssize_t r;
        StringValue(piece);
        r = oribi_discard_chunked(&d, RSTRING_PTR(piece), (size_t)RSTRING_LEN(piece), &data);
        total += data;
        if (r == ORIBI_CHUNKED_ERROR) {
            rb_hash_aset(h, sym("error"), Qtrue);
            return h;
        }
        if (r >= 0) {
            VALUE rest = rb_str_substr(piece, (long)r, RSTRING_LEN(piece) - (long)r);
            while (++i < RARRAY_LEN(pieces))
                rb_str_append(rest, RARRAY_AREF(pieces, i));
            rb_hash_aset(h, sym("data_bytes"), SIZET2NUM(total));
            rb_hash_aset(h, sym("rest"), rest);
            return h;
        }
    }
    rb_hash_aset(h, sym("incomplete"), Qtrue);
    rb_hash_aset(h, sym("data_bytes"), SIZET2NUM(total));
    return h;
}

/* The versions a listener takes, by the names its option gives them
 * (Parser::PROXY_PROTOCOLS, which the options and the listeners read). */
static VALUE proxy_protocols;

static int proxy_accept(VALUE v)
{
    if (RB_TYPE_P(v, T_SYMBOL))
        v = rb_sym2str(v);
    VALUE mask = rb_hash_lookup2(proxy_protocols, StringValue(v), Qnil);
    if (NIL_P(mask))
        rb_raise(rb_eArgError, "accept must be :v1, :v2 or :any");
    return NUM2INT(mask);
}

static VALUE proxy_address(int family, const unsigned char *a)
{
    char text[INET6_ADDRSTRLEN];
    inet_ntop(family == ORIBI_PROXY_INET ? AF_INET : AF_INET6, a, text, sizeof(text));
    return rb_str_new_cstr(text);
}

/* Oribi::Parser.parse_proxy(str, accept = :any) -> Hash: {incomplete: true},
 * {error: true}, or the header: consumed, version (1, 2), family (:inet,
 * :inet6, or :local: the socket's own peer stands) and for an address
 * source, source_port, destination, destination_port. */
static VALUE parser_parse_proxy(int argc, VALUE *argv, VALUE self)
{
    VALUE str, accept, h = rb_hash_new();
    struct oribi_proxy_header ph;
    rb_scan_args(argc, argv, "11", &str, &accept);
    StringValue(str);
    int mask = NIL_P(accept) ? ORIBI_PROXY_V1 | ORIBI_PROXY_V2 : proxy_accept(accept);
    int r = oribi_proxy_parse(RSTRING_PTR(str), (size_t)RSTRING_LEN(str), mask, &ph);
    if (r == ORIBI_PARSE_INCOMPLETE) {
        rb_hash_aset(h, sym("incomplete"), Qtrue);
    } else if (r == ORIBI_PARSE_ERROR) {
        rb_hash_aset(h, sym("error"), Qtrue);
    } else {
        rb_hash_aset(h, sym("consumed"), INT2NUM(r));
        rb_hash_aset(h, sym("version"), INT2NUM(ph.version));
        rb_hash_aset(h, sym("family"),
                     sym(ph.family == ORIBI_PROXY_INET    ? "inet"
                         : ph.family == ORIBI_PROXY_INET6 ? "inet6"
                                                          : "local"));
        if (ph.family != ORIBI_PROXY_LOCAL) {
            rb_hash_aset(h, sym("source"), proxy_address(ph.family, ph.src));
            rb_hash_aset(h, sym("source_port"), INT2NUM(ph.src_port));
            rb_hash_aset(h, sym("destination"), proxy_address(ph.family, ph.dst));
            rb_hash_aset(h, sym("destination_port"), INT2NUM(ph.dst_port));
        }
    }
    RB_GC_GUARD(str);
    return h;
}

static VALUE parser_simd_p(VALUE self)
{
    return oribi_parser_simd() ? Qtrue : Qfalse;
}

static VALUE parser_path(VALUE self)
{
    return rb_str_new_cstr(oribi_parser_path());
}

void Init_oribi_parser(VALUE mOribi)
{
    VALUE m = rb_define_module_under(mOribi, "Parser");
    rb_define_module_function(m, "parse", parser_parse, -1);
    rb_define_module_function(m, "decode_chunked", parser_decode_chunked, 1);
    rb_define_module_function(m, "parse_response", parser_parse_response, -1);
    rb_define_module_function(m, "discard_chunked", parser_discard_chunked, 1);
    rb_define_module_function(m, "parse_proxy", parser_parse_proxy, -1);
    rb_define_module_function(m, "simd?", parser_simd_p, 0);
    /* "AVX2", "SSE4.2" or "portable" */
    rb_define_module_function(m, "path", parser_path, 0);
    rb_define_const(m, "DEFAULT_MAX_REQUEST_LINE", SIZET2NUM(ORIBI_DEFAULT_MAX_REQUEST_LINE));
    rb_define_const(m, "DEFAULT_MAX_HEADER_BYTES", SIZET2NUM(ORIBI_DEFAULT_MAX_HEADER_BYTES));
    rb_define_const(m, "DEFAULT_MAX_HEADERS", SIZET2NUM(ORIBI_DEFAULT_MAX_HEADERS));
    rb_define_const(m, "CHUNK_EXT_MAX", INT2NUM(ORIBI_CHUNK_EXT_MAX));
    rb_define_const(m, "CHUNK_TRAILER_MAX", INT2NUM(ORIBI_CHUNK_TRAILER_MAX));
    rb_define_const(m, "PROXY_V1_MAX", INT2NUM(ORIBI_PROXY_V1_MAX));
    rb_define_const(m, "PROXY_V2_MAX", INT2NUM(ORIBI_PROXY_V2_MAX));
    proxy_protocols = rb_hash_new();
    rb_hash_aset(proxy_protocols, rb_str_new_cstr("v1"), INT2NUM(ORIBI_PROXY_V1));
    rb_hash_aset(proxy_protocols, rb_str_new_cstr("v2"), INT2NUM(ORIBI_PROXY_V2));
    rb_hash_aset(proxy_protocols, rb_str_new_cstr("any"), INT2NUM(ORIBI_PROXY_V1 | ORIBI_PROXY_V2));
    rb_define_const(m, "PROXY_PROTOCOLS", rb_obj_freeze(proxy_protocols));
}
