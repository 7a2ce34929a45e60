/*
 * The app's response on the wire. The head comes from the status and the
 * headers (checked field by field, hop-by-hop fields being the server's);
 * the body is framed by what it is: an Array gets a content-length, a
 * to_path file goes out with sendfile(2), an each body is chunked (or uses
 * the app's length), a call body writes to a stream and the connection
 * closes after it. A 101 (or a rack.protocol header) switches the
 * connection to the app's protocol. rack.early_hints' 103s use the same
 * field checks.
 */
#include <errno.h>
#include <fcntl.h>
#include <ruby.h>
#include <ruby/io.h>
#include <ruby/thread.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ruby/hijack.h"
#include "ruby/rack_response.h"
#include "ruby/stream.h"
#include "ruby/env.h"
#include "http/response.h"
#include "loop/log.h"
#include "os/clock.h"

static ID id_each, id_close, id_to_ary, id_to_path, id_call;
static VALUE k_rack_protocol;

static void out_reserve(struct oribi_exchange *x, size_t n)
{
    if (x->out_cap - x->out_len >= n)
        return;
    size_t cap = x->out_cap ? x->out_cap : 8192;
    while (cap - x->out_len < n)
        cap *= 2;
    char *p = realloc(x->out, cap);
    if (!p)
        rb_raise(rb_eNoMemError, "response buffer");
    x->out = p;
    x->out_cap = cap;
}

static void out_cat(struct oribi_exchange *x, const char *p, size_t n)
{
    out_reserve(x, n);
    memcpy(x->out + x->out_len, p, n);
    x->out_len += n;
}

static void head_line(struct oribi_exchange *x, const char *s)
{
    out_cat(x, s, strlen(s));
}

static void *wait_nogvl(void *p)
{
    struct oribi_rack_response *r = p;
    return (void *)(intptr_t)oribi_conn_wait_writable(r->c, r->wait_ms ? r->wait_ms : r->x->opt->write_timeout_ms);
}

/* Waits until the client can take more: 0, or -1 when it went away or took
 * nothing for the wait (write_timeout). A fiber under a scheduler lets the
 * others run; a thread waits without the GVL. */
static int wait_writable(struct oribi_rack_response *r)
{
    int w = oribi_exchange_fiber_wait(r->c->fd, RB_WAITFD_OUT, r->wait_ms ? r->wait_ms : r->x->opt->write_timeout_ms);
    if (w >= 0)
        return w ? 0 : -1;
    return (int)(intptr_t)rb_thread_call_without_gvl(wait_nogvl, r, RUBY_UBF_IO, NULL);
}

/* Waits (without the GVL) until the client takes everything kept and
 * spooled; 0, or -1 when it went away or took nothing for write_timeout. */
static int spool_settle(struct oribi_rack_response *r)
{
    int w;
    while ((w = oribi_spool_send(&r->spool, r->c)) == 1)
        if (wait_writable(r) < 0)
            return -1;
    return w;
}

/* Bodies whose bytes all pass through here may be spooled; a stream or a
 * hijack writes to the socket itself after its head. */
static int may_spool(const struct oribi_rack_response *r)
{
    return r->x->opt->max_response_spool > 0 && r->mode != BODY_STREAM && r->mode != BODY_HIJACK;
}

static size_t iov_bytes(const struct iovec *iov, int n)
{
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += iov[i].iov_len;
    return total;
}

/* The conn keeps its share: iov goes after what is spooled, unless the
 * client has caught up meanwhile (then 0: write it as usual). Past the
 * spool limit, or when the tmpfile fails, the thread waits for the client
 * to take it all, and the response goes on in memory. When the worker's
 * spool is full (max_worker_spool) a client that took nothing for
 * SHED_STALL_MS is dropped: the slowest readers lose, never a request that
 * needs the disk for its body. One that reads is waited for. */
static int spool_write(struct oribi_rack_response *r, const struct iovec *iov, int n)
{
    int w = oribi_spool_send(&r->spool, r->c);
    if (w == 1 && r->spool.len + (int64_t)iov_bytes(iov, n) <= r->x->opt->max_response_spool) {
        int a;
        while ((a = oribi_spool_append(&r->spool, r->c, r->x->opt->tmpdir, iov, n)) == 1) {
            int64_t idle = oribi_coarse_ms() - r->c->wprogress_ms;
            if (idle >= SHED_STALL_MS) {
                oribi_log("max_worker_spool (%zu bytes) is full: dropped a client that read nothing for %lld ms",
                          r->x->opt->max_worker_spool, (long long)idle);
                w = -1;
                break;
            }
            /* Full, and this client took bytes lately: it gets the rest of
             * the stall to take more (then the room it made is its own) */
            r->wait_ms = SHED_STALL_MS - idle;
            wait_writable(r);
            r->wait_ms = 0;
            if ((w = oribi_spool_send(&r->spool, r->c)) != 1)
                break;
        }
        if (a == 0)
            return 1;
        if (a < 0)
            oribi_log("a response could not be spooled to %s (%s): the app thread waits for the client",
                      r->x->opt->tmpdir, strerror(errno));
    }
    if (w == 1)
        w = spool_settle(r);
    if (w < 0)
        r->gone = 1;
    r->spooling = 0;
    return w < 0;
}

/* Parts of an Array body per writev. Small: these frames are on the stack
 * of every thread and fiber that writes a response, and a fiber's stack
 * keeps resident every page its deepest call touched: 16 KiB arrays here
 * made each of ten thousand open streams (fibers) cost about that much
 * more. A body of more parts takes a writev per ARRAY_IOV. */
#define ARRAY_IOV 64

/* Writes what is gathered plus extra. A client slower than the body is
 * produced: once its conn keeps its share, the rest of the response is
 * spooled (max_response_spool), else the thread waits for the client.
 * last: these bytes end the response (oribi_conn_write_last). */
static void out_write(struct oribi_rack_response *r, const struct iovec *extra, int nextra, int last)
{
    struct iovec iov[1 + ARRAY_IOV]; /* the gathered bytes, then extra (ARRAY_IOV at most) */
    int n = 0;
    if (r->gone)
        return;
    if (r->x->out_len)
        iov[n++] = (struct iovec){r->x->out, r->x->out_len};
    for (int i = 0; i < nextra && n < (int)(sizeof(iov) / sizeof(iov[0])); i++)
        iov[n++] = extra[i];
    r->flushed = 1;
    if (n && r->spooling && spool_write(r, iov, n)) {
        r->x->out_len = 0;
        return;
    }
    if (r->gone)
        return;
    int w = !n ? 0 : last ? oribi_conn_write_last(r->c, iov, n) : oribi_conn_write(r->c, iov, n);
    r->x->out_len = 0;
    if (w == 1 && may_spool(r)) {
        r->spooling = 1; /* these bytes are kept; the next ones go to disk */
        return;
    }
    while (w == 1) {
        if (wait_writable(r) < 0) {
            w = -1;
            break;
        }
        w = oribi_conn_flush(r->c);
    }
    if (w < 0)
        r->gone = 1;
}

static void out_flush(struct oribi_rack_response *r, const struct iovec *extra, int nextra)
{
    out_write(r, extra, nextra, 0);
}

/* The end of a spooled response: what the client has not taken yet is
 * the loop's to send, after the conn's kept bytes. */
static void spool_finish(struct oribi_rack_response *r)
{
    if (r->spooling && !r->gone)
        oribi_spool_hand(&r->spool, r->c); /* closes the spool too */
    else
        oribi_spool_close(&r->spool);
    r->spooling = 0;
}

/* The head and everything kept goes out before the app writes to the
 * socket itself (stream, hijack) or sendfile bypasses the kept buffer. */
static void out_drain(struct oribi_rack_response *r)
{
    out_flush(r, NULL, 0);
    if (!r->gone && oribi_exchange_drain(r->x, r->c) < 0)
        r->gone = 1;
}

/* ---- the head ---- */

struct head_ctx {
    struct oribi_exchange *x;
    struct oribi_rack_response *r; /* NULL for early hints */
    int connection_close;
    int fields; /* fields written */
    int date;   /* the app's date field was written: the server's is not */
};

/* Why a response field is not sent: each name is logged once for each. */
enum drop_reason {
    DROP_NIL,
    DROP_NOT_STRING,
    DROP_CONTROL,
    DROP_NOT_CALLABLE,
    DROP_NO_UPGRADE,
    DROP_BAD_NAME,
    DROP_BAD_LENGTH,
    DROP_NOT_OFFERED,
};
static const char *const drop_why[] = {
    [DROP_NIL] = "value is nil, not a String",
    [DROP_NOT_STRING] = "value is not a String",
    [DROP_CONTROL] = "value has CR, LF, NUL or another control byte",
    [DROP_NOT_CALLABLE] = "does not respond to call",
    [DROP_NO_UPGRADE] = "the request asked for no upgrade",
    [DROP_BAD_NAME] = "not a valid field name",
    [DROP_BAD_LENGTH] = "not a valid length",
    [DROP_NOT_OFFERED] = "not one of the protocols the request offered",
};

/* Header names this worker has logged a drop of, each with the reasons
 * logged (a bit each): an app that sends `x-rev => nil` on every response
 * (an unset environment variable) logged a line per response. Each drop
 * is counted in the scoreboard (/stats); each name is logged once for each
 * reason, for up to DROPPED_NAMES names. A repeat costs a lookup, nothing
 * allocated. */
#define DROPPED_NAMES 256
static VALUE dropped_names;

void oribi_rack_response_new_worker(void)
{
    rb_hash_clear(dropped_names);
}

/* Under the GVL (the app thread writing the response). */
static void drop_header(struct oribi_exchange *x, VALUE key, enum drop_reason why)
{
    if (x->score)
        __atomic_add_fetch(&x->score->dropped_headers, 1, __ATOMIC_RELAXED);
    long seen = FIX2LONG(rb_hash_lookup2(dropped_names, key, INT2FIX(0)));
    if (seen & (1L << why) || (!seen && RHASH_SIZE(dropped_names) >= DROPPED_NAMES))
        return;
    rb_hash_aset(dropped_names, key, LONG2FIX(seen | (1L << why)));
    VALUE name = rb_inspect(key);
    oribi_log("dropped response header %.*s: %s (logged once in this worker; /stats counts each: "
              "dropped_headers)",
              (int)RSTRING_LEN(name), RSTRING_PTR(name), drop_why[why]);
}

static int parse_length(const char *p, long n, int64_t *out)
{
    int64_t v = 0;
    if (n < 1 || n > 18)
        return 0;
    for (long i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return 0;
        v = v * 10 + (p[i] - '0');
    }
    *out = v;
    return 1;
}

static int head_field(struct oribi_exchange *x, VALUE key, VALUE val)
{
    if (!RB_TYPE_P(val, T_STRING)) {
        drop_header(x, key, NIL_P(val) ? DROP_NIL : DROP_NOT_STRING);
        return 0;
    }
    if (!oribi_field_value_ok(RSTRING_PTR(val), RSTRING_LEN(val))) {
        drop_header(x, key, DROP_CONTROL);
        return 0;
    }
    out_reserve(x, (size_t)(RSTRING_LEN(key) + RSTRING_LEN(val) + 4));
    out_cat(x, RSTRING_PTR(key), (size_t)RSTRING_LEN(key));
    out_cat(x, ": ", 2);
    out_cat(x, RSTRING_PTR(val), (size_t)RSTRING_LEN(val));
    out_cat(x, "\r\n", 2);
    return 1;
}

/* "close" as one of the comma-separated tokens of a Connection value */
static int has_close_token(const char *p, long n)
{
    long i = 0;
    while (i < n) {
        while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == ','))
            i++;
        long start = i;
        while (i < n && p[i] != ',' && p[i] != ' ' && p[i] != '\t')
            i++;
        if (i - start == 5 && strncasecmp(p + start, "close", 5) == 0)
            return 1;
    }
    return 0;
}

/* rack.* fields talk to the server and never reach the wire; rack.hijack
 * asks for a partial hijack (rack.protocol was looked up before). */
static void rack_field(struct oribi_rack_response *r, const char *k, long klen, VALUE key, VALUE val)
{
    if (!r)
        return;
    if (klen == 11 && memcmp(k + 5, "hijack", 6) == 0) {
        if (rb_respond_to(val, id_call))
            r->hijack = val;
        else
            drop_header(r->x, key, DROP_NOT_CALLABLE);
    } else if (klen == 13 && memcmp(k + 5, "protocol", 8) == 0 && !r->c->req.upgrade) {
        drop_header(r->x, key, DROP_NO_UPGRADE);
    }
}

static int head_each(VALUE key, VALUE val, VALUE arg)
{
    struct head_ctx *h = (struct head_ctx *)arg;
    struct oribi_rack_response *r = h->r;
    if (!RB_TYPE_P(key, T_STRING))
        return ST_CONTINUE;
    const char *k = RSTRING_PTR(key);
    long klen = RSTRING_LEN(key);
    if (klen > 5 && strncmp(k, "rack.", 5) == 0) {
        rack_field(r, k, klen, key, val);
        return ST_CONTINUE;
    }
    if (!oribi_field_name_ok(k, (size_t)klen)) {
        drop_header(h->x, key, DROP_BAD_NAME);
        return ST_CONTINUE;
    }
    switch (oribi_hop_by_hop(k, (size_t)klen)) {
    case ORIBI_HOP_CONNECTION:
        /* The server owns the connection; the app may only ask to close it. */
        if (RB_TYPE_P(val, T_STRING) && has_close_token(RSTRING_PTR(val), RSTRING_LEN(val)))
            h->connection_close = 1;
        return ST_CONTINUE;
    case ORIBI_HOP_CONTENT_LENGTH:
        if (r && (!RB_TYPE_P(val, T_STRING) || !parse_length(RSTRING_PTR(val), RSTRING_LEN(val), &r->app_length)))
            drop_header(h->x, key, DROP_BAD_LENGTH);
        return ST_CONTINUE;
    case ORIBI_HOP_TRANSFER_ENCODING:
    case ORIBI_HOP_OTHER:
        return ST_CONTINUE; /* framing is the server's */
    }
    /* An accepted rack.protocol names the upgrade itself. */
    if (r && !NIL_P(r->protocol) && klen == 7 && strncasecmp(k, "upgrade", 7) == 0)
        return ST_CONTINUE;
    int written = 0;
    if (RB_TYPE_P(val, T_ARRAY)) {
        for (long i = 0; i < RARRAY_LEN(val); i++)
            written += head_field(h->x, key, RARRAY_AREF(val, i));
    } else {
        written = head_field(h->x, key, val);
    }
    h->fields += written;
    if (written && klen == 4 && strncasecmp(k, "date", 4) == 0)
        h->date = 1;
    return ST_CONTINUE;
}

/* A rack.protocol response header switches to one of the protocols the
 * request offered (env["rack.protocol"]); any other value is dropped. */
static void accept_protocol(struct oribi_rack_response *r)
{
    VALUE proto = rb_hash_lookup(r->headers, k_rack_protocol);
    if (NIL_P(proto))
        return;
    VALUE offered = rb_hash_lookup(r->env, k_rack_protocol);
    if (RB_TYPE_P(proto, T_STRING) && RB_TYPE_P(offered, T_ARRAY) && RTEST(rb_ary_includes(offered, proto)) &&
        oribi_field_value_ok(RSTRING_PTR(proto), RSTRING_LEN(proto)))
        r->protocol = proto;
    else
        drop_header(r->x, k_rack_protocol, DROP_NOT_OFFERED);
}

/* ---- framing ---- */

static void cat_length(struct oribi_exchange *x, int64_t n)
{
    char cl[40];
    out_cat(x, cl, oribi_content_length(cl, (uint64_t)n));
}

/* to_path's value as a String: a String, or what File.open would take
 * (Rails' send_file gives a Pathname: its to_path; else to_str); Qnil. */
static VALUE body_path(VALUE path)
{
    if (!RB_TYPE_P(path, T_STRING) && rb_respond_to(path, id_to_path))
        path = rb_funcall(path, id_to_path, 0);
    return RB_TYPE_P(path, T_STRING) ? path : rb_check_string_type(path);
}

/* Opens the file of a to_path body; 0 when the body has none usable (it is
 * then sent with each, which SPEC says yields the same bytes). */
static int open_body_file(struct oribi_rack_response *r)
{
    if (!rb_respond_to(r->body, id_to_path))
        return 0;
    VALUE path = body_path(rb_funcall(r->body, id_to_path, 0));
    if (NIL_P(path) || memchr(RSTRING_PTR(path), 0, (size_t)RSTRING_LEN(path)))
        return 0;
    int fd = open(StringValueCStr(path), O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
        return 0;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return 0;
    }
    r->file_fd = fd;
    r->file_size = st.st_size;
    return 1;
}

/* A 2xx to CONNECT makes the connection a tunnel right after its head
 * (RFC 9110 9.3.6): a proxy in front switches to tunnel mode on it. */
static int tunnel(const struct oribi_rack_response *r)
{
    const struct oribi_request *q = &r->c->req;
    return r->status >= 200 && r->status < 300 && q->method_len == 7 && memcmp(q->method, "CONNECT", 7) == 0;
}

/* Only the app can carry a tunnel, on the socket it took; a 2xx without
 * that would tell a proxy to let the client's next bytes through unread.
 * 501, not 405: the method is what the server cannot serve here, and a
 * 405 would have to list in Allow the methods only the app knows. */
static void refuse_tunnel(struct oribi_rack_response *r)
{
    r->refused = 501;
    rb_raise(rb_eArgError,
             "answered 501: the app answered CONNECT with %d but took no socket (rack.hijack): "
             "a tunnel it does not carry is not opened",
             r->status);
}

/* After a 101 the bytes are the new protocol's: no framing of ours, and the
 * connection is the app's (hijack) or closes when the body is done. */
static void frame_switch(struct oribi_rack_response *r)
{
    struct oribi_exchange *x = r->x;
    oribi_conn_no_keepalive(r->c);
    head_line(x, "connection: upgrade\r\n");
    if (!NIL_P(r->protocol)) {
        head_line(x, "upgrade: ");
        out_cat(x, RSTRING_PTR(r->protocol), (size_t)RSTRING_LEN(r->protocol));
        head_line(x, "\r\n");
    }
    if (!NIL_P(r->hijack))
        r->mode = BODY_HIJACK;
    else if (RB_TYPE_P(r->body, T_ARRAY))
        r->mode = BODY_ARRAY;
    else if (!rb_respond_to(r->body, id_each) && rb_respond_to(r->body, id_call))
        r->mode = BODY_STREAM;
    else
        r->mode = BODY_CLOSE;
}

static void array_length(struct oribi_rack_response *r)
{
    int64_t total = 0;
    for (long i = 0; i < RARRAY_LEN(r->body); i++) {
        VALUE part = RARRAY_AREF(r->body, i);
        if (!RB_TYPE_P(part, T_STRING))
            rb_raise(rb_eTypeError, "body element is not a String");
        total += RSTRING_LEN(part);
    }
    r->mode = BODY_ARRAY;
    cat_length(r->x, total);
}

/* Chooses the framing: our own length for arrays and files, the app's for
 * bodies that announce one, chunked for HTTP/1.1, close-delimited for
 * HTTP/1.0 and for streams; none after a 101 or a partial hijack. */
static void frame_body(struct oribi_rack_response *r)
{
    struct oribi_exchange *x = r->x;
    if (r->status == 101)
        return frame_switch(r);
    if (!NIL_P(r->hijack)) {
        /* The app writes the body on the socket it is given, and closes it. */
        r->mode = BODY_HIJACK;
        oribi_conn_no_keepalive(r->c);
        if (r->app_length >= 0 && !tunnel(r)) /* a tunnel has no framing */
            cat_length(x, r->app_length);
        return;
    }
    if (r->status == 205) {
        /* No content (RFC 9110 15.3.6), said with a length so that the
         * connection stays framed: the app's body and length are not sent. */
        r->mode = BODY_NONE;
        cat_length(x, 0);
        return;
    }
    int bodyless = r->status < 200 || r->status == 204 || r->status == 304;
    if (bodyless || r->head_only) {
        r->mode = BODY_NONE;
        /* HEAD and 304 may say the length a GET would have had. */
        if (bodyless && r->status != 304)
            return;
        if (r->app_length >= 0) {
            cat_length(x, r->app_length);
        } else if (r->head_only && !RB_TYPE_P(r->body, T_ARRAY) && open_body_file(r)) {
            cat_length(x, r->file_size);
        }
        return;
    }
    VALUE body = r->body;
    if (RB_TYPE_P(body, T_ARRAY))
        return array_length(r);
    if (open_body_file(r)) {
        r->mode = BODY_FILE;
        cat_length(x, r->app_length >= 0 ? r->app_length : r->file_size);
        if (r->app_length >= 0 && r->app_length < r->file_size)
            r->file_size = r->app_length; /* never send more than announced */
        return;
    }
    if (rb_respond_to(body, id_to_ary)) {
        VALUE ary = rb_check_array_type(body);
        if (!NIL_P(ary)) {
            r->to_close = Qnil; /* Rack 3: to_ary closes the body itself */
            r->body = ary;
            return array_length(r);
        }
    }
    if (!rb_respond_to(body, id_each)) {
        if (!rb_respond_to(body, id_call))
            rb_raise(rb_eTypeError, "body responds to neither each, call nor to_ary");
        /* A stream has no length we could know: the close ends it. */
        r->mode = BODY_STREAM;
        oribi_conn_no_keepalive(r->c);
        if (r->app_length >= 0)
            cat_length(x, r->app_length);
    } else if (r->app_length >= 0) {
        r->mode = BODY_LENGTH;
        cat_length(x, r->app_length);
    } else if (r->c->req.minor_version == 1) {
        r->mode = BODY_CHUNKED;
        head_line(x, "transfer-encoding: chunked\r\n");
    } else {
        r->mode = BODY_CLOSE; /* HTTP/1.0 and no length: the close ends the body */
        oribi_conn_no_keepalive(r->c);
    }
}

/* ---- the body ---- */

/* Each chunk goes out when the body yields it: an each body may wait
 * between chunks (Server-Sent Events, ActionController::Live), and nothing
 * tells the server whether the next one is coming at once. The head and
 * the chunk's framing ride in the same sendmsg as its bytes. */
static VALUE chunk_each(RB_BLOCK_CALL_FUNC_ARGLIST(chunk, arg))
{
    struct oribi_rack_response *r = (struct oribi_rack_response *)arg;
    if (!RB_TYPE_P(chunk, T_STRING))
        rb_raise(rb_eTypeError, "body yielded a non-String (%" PRIsVALUE ")", rb_obj_class(chunk));
    if (r->gone)
        rb_iter_break();
    size_t n = (size_t)RSTRING_LEN(chunk);
    if (r->mode == BODY_LENGTH && r->sent + (int64_t)n > r->app_length) /* never send more than announced */
        n = (size_t)(r->app_length - r->sent);
    r->sent += (int64_t)n;
    if (n == 0)
        return Qnil;
    static char crlf[] = "\r\n"; /* iov_base is not const: a literal there warns with -Wwrite-strings */
    struct iovec iov[2] = {{RSTRING_PTR(chunk), n}, {crlf, 2}};
    if (r->mode == BODY_CHUNKED) {
        char pre[20];
        out_cat(r->x, pre, oribi_chunk_prefix(pre, n));
    }
    out_flush(r, iov, r->mode == BODY_CHUNKED ? 2 : 1);
    RB_GC_GUARD(chunk);
    return Qnil;
}

static void write_array(struct oribi_rack_response *r)
{
    long n = RARRAY_LEN(r->body);
    struct iovec iov[ARRAY_IOV];
    int k = 0;
    for (long i = 0; i < n; i++) {
        VALUE s = RARRAY_AREF(r->body, i);
        if (!RB_TYPE_P(s, T_STRING)) /* checked when framed, except after a 101 */
            rb_raise(rb_eTypeError, "body element is not a String");
        iov[k++] = (struct iovec){RSTRING_PTR(s), (size_t)RSTRING_LEN(s)};
        r->sent += RSTRING_LEN(s);
        if (k == ARRAY_IOV) {
            out_flush(r, iov, k);
            k = 0;
        }
    }
    out_write(r, iov, k, 1); /* the whole response: it may wait for a pipeline's next ones */
}

/* The head goes out with the first file bytes (one segment), and the rest
 * of the file is the loop's to send as the client takes it: no app thread
 * waits on a client that reads slowly, or not at all. */
static void write_file(struct oribi_rack_response *r)
{
    struct oribi_exchange *x = r->x;
    if (x->out_len) {
        struct iovec iov = {x->out, x->out_len};
        int w = r->file_size > 0 ? oribi_conn_write_more(r->c, &iov, 1) : oribi_conn_write(r->c, &iov, 1);
        if (w < 0)
            r->gone = 1;
        x->out_len = 0;
        r->flushed = 1;
    }
    if (r->app_length >= 0 && r->app_length > r->file_size)
        oribi_conn_no_keepalive(r->c); /* fewer bytes than the head announced: framing is lost */
    if (r->gone || r->file_size <= 0)
        return;
    oribi_conn_hand_file(r->c, r->file_fd, 0, r->file_size, 0);
    r->sent = r->file_size;
    r->file_fd = -1;
    if (oribi_conn_send_pending(r->c) < 0) /* a small file is usually all out now */
        r->gone = 1;
}

/* The app writes the body itself: head first, then body.call(stream). */
static void write_stream(struct oribi_rack_response *r)
{
    out_drain(r);
    if (r->gone)
        return;
    VALUE stream = oribi_stream_new(r->x->self);
    r->x->stream = stream;
    rb_funcall(r->body, id_call, 1, stream);
}

/* Partial hijack: the head goes out, then the socket is the app's. */
static void write_hijack(struct oribi_rack_response *r)
{
    out_drain(r);
    if (r->gone)
        return;
    VALUE io = oribi_hijack_io(r->x, r->c);
    r->c = NULL;
    rb_funcall(r->hijack, id_call, 1, io);
}

static VALUE write_body(struct oribi_rack_response *r)
{
    struct oribi_exchange *x = r->x;
    switch (r->mode) {
    case BODY_NONE:
        out_write(r, NULL, 0, 1);
        break;
    case BODY_ARRAY:
        write_array(r);
        break;
    case BODY_FILE:
        write_file(r);
        break;
    case BODY_STREAM:
        write_stream(r);
        break;
    case BODY_HIJACK:
        write_hijack(r);
        break;
    default:
        rb_block_call(r->body, id_each, 0, NULL, chunk_each, (VALUE)r);
        if (r->mode == BODY_CHUNKED)
            out_cat(x, "0\r\n\r\n", 5);
        if (r->mode == BODY_LENGTH && r->sent != r->app_length)
            oribi_conn_no_keepalive(r->c); /* the body fell short of its content-length: framing is lost */
        out_flush(r, NULL, 0);
    }
    spool_finish(r);
    return Qnil;
}

/* A 1xx final answer would be taken by the client as interim, and the
 * next response on the connection as this one's (RFC 9110 15.2); a 101
 * to a request that offered no upgrade would switch it to bytes the client
 * never asked for (15.2.2). Raised before anything is written: a 500. */
static void check_final_status(const struct oribi_rack_response *r)
{
    if (r->status == 101 && !r->c->req.upgrade)
        rb_raise(rb_eArgError, "status 101 to a request without Upgrade (use rack.protocol)");
    if (r->status < 200 && r->status != 101)
        rb_raise(rb_eArgError, "status %d is informational, not a final response (use rack.early_hints)", r->status);
}

VALUE oribi_rack_response_write(VALUE arg)
{
    struct oribi_rack_response *r = (struct oribi_rack_response *)arg;
    struct oribi_exchange *x = r->x;
    size_t n;
    if (r->c->req.upgrade)
        accept_protocol(r);
    if (!NIL_P(r->protocol))
        r->status = 101; /* HTTP/1 upgrades with a 101 (SPEC: rack.protocol) */
    check_final_status(r);
    const char *s = oribi_status_line(r->status, &n);
    out_cat(x, s, n);
    struct head_ctx h = {x, r, 0, 0, 0};
    if (RB_TYPE_P(r->headers, T_HASH))
        rb_hash_foreach(r->headers, head_each, (VALUE)&h);
    if (!h.date) { /* one Date field (RFC 9110 6.6.1): the app's when it set one */
        s = oribi_date_header(&x->date, time(NULL), &n);
        out_cat(x, s, n);
    }
    if (h.connection_close)
        oribi_conn_no_keepalive(r->c);
    if (tunnel(r) && NIL_P(r->hijack))
        refuse_tunnel(r);
    frame_body(r);
    /* After a 101 or a tunnel's 2xx the connection is no longer HTTP's. */
    if (r->status != 101 && !tunnel(r)) {
        if (!r->c->keepalive)
            head_line(x, "connection: close\r\n");
        else if (r->c->req.minor_version == 0)
            head_line(x, "connection: keep-alive\r\n");
    }
    head_line(x, "\r\n");
    return write_body(r);
}

VALUE oribi_rack_response_close(VALUE arg)
{
    struct oribi_rack_response *r = (struct oribi_rack_response *)arg;
    if (r->file_fd >= 0) {
        close(r->file_fd);
        r->file_fd = -1;
    }
    oribi_spool_close(&r->spool); /* a body that raised half-way */
    if (!NIL_P(r->to_close) && rb_respond_to(r->to_close, id_close))
        rb_funcall(r->to_close, id_close, 0);
    return Qnil;
}

/* ---- rack.early_hints ---- */

/* env["rack.early_hints"].call(headers): a 103 with the fields that pass
 * the same checks as the final response's. Only while the app runs (the
 * env has it only for HTTP/1.1); later calls do nothing, also once its
 * request is over and its app thread serves another. A hint is only
 * advice: it goes out only when the client took every byte before it, so
 * an app hinting in a loop to a client that reads nothing keeps at most
 * one hint (every other write is bounded by the conn's share too). */
VALUE oribi_early_hints(VALUE ticket, VALUE headers)
{
    struct oribi_exchange *x = oribi_ticket_exchange(ticket, TICKET_EARLY_HINTS);
    Check_Type(headers, T_HASH);
    struct oribi_conn *c = x && x->phase == PHASE_APP ? oribi_exchange_conn(x) : NULL;
    if (!c || c->req.minor_version != 1 || oribi_conn_pending(c))
        return Qnil;
    x->out_len = 0;
    head_line(x, "HTTP/1.1 103 Early Hints\r\n");
    struct head_ctx h = {x, NULL, 0, 0, 0};
    rb_hash_foreach(headers, head_each, (VALUE)&h);
    if (h.fields) {
        head_line(x, "\r\n");
        /* Kept bytes go out with the final response; a gone peer is its
         * business too. */
        struct iovec iov = {x->out, x->out_len};
        oribi_conn_write(c, &iov, 1);
    }
    x->out_len = 0;
    return Qnil;
}

void Init_oribi_rack_response(void)
{
    id_each = rb_intern("each");
    id_close = rb_intern("close");
    id_to_ary = rb_intern("to_ary");
    id_to_path = rb_intern("to_path");
    id_call = rb_intern("call");
    k_rack_protocol = oribi_fstr("rack.protocol");
    dropped_names = rb_hash_new();
    rb_gc_register_mark_object(dropped_names);
}
