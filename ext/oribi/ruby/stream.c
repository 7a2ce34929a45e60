/*
 * Oribi::Stream: what a streaming body (body.call(stream)) writes to and
 * reads from, over the connection of its exchange's request. Not a raw IO, so
 * that the server's limits hold: a write returns once the kernel took every
 * byte, waiting at most write_timeout each time the socket is full (a
 * stuck client cannot hold a worker forever); a read yields the bytes the
 * client sent past the request first, then reads the socket, waiting at
 * most body_timeout. When the response is over the stream is closed and
 * the server closes the connection (the app framed the body, so only a
 * close can end it).
 */
#include <errno.h>
#include <ruby.h>
#include <ruby/encoding.h>
#include <ruby/io.h>
#include <string.h>

#include "ruby/stream.h"
#include "loop/transport.h"

#define STREAM_WRITE_SLICE (1024 * 1024) /* bytes handed to the conn per wait */

struct stream {
    VALUE exchange;
    int read_closed, write_closed;
};

static VALUE cStream;
static ID id_exception, id_wait_readable, id_wait_writable;

static void stream_mark(void *p)
{
    rb_gc_mark(((struct stream *)p)->exchange);
}

static const rb_data_type_t stream_type = {
    "Oribi::Stream", {stream_mark, RUBY_TYPED_DEFAULT_FREE, NULL}, NULL, NULL, RUBY_TYPED_FREE_IMMEDIATELY};

VALUE oribi_stream_new(VALUE exchange)
{
    struct stream *s;
    VALUE self = TypedData_Make_Struct(cStream, struct stream, &stream_type, s);
    s->exchange = exchange;
    return self;
}

void oribi_stream_finish(VALUE self)
{
    struct stream *s = rb_check_typeddata(self, &stream_type);
    s->read_closed = s->write_closed = 1;
}

static struct oribi_exchange *stream_exchange(VALUE self)
{
    struct stream *s = rb_check_typeddata(self, &stream_type);
    return oribi_exchange_get(s->exchange);
}

/* The conn behind the stream; raises IOError as a closed IO would. */
static struct oribi_conn *stream_conn(VALUE self, struct oribi_exchange **xp, int writing)
{
    struct stream *s = rb_check_typeddata(self, &stream_type);
    if (writing ? s->write_closed : s->read_closed)
        rb_raise(rb_eIOError, writing ? "not opened for writing" : "not opened for reading");
    struct oribi_exchange *x = stream_exchange(self);
    struct oribi_conn *c = x->stream == self ? oribi_exchange_conn(x) : NULL;
    if (!c)
        rb_raise(rb_eIOError, "closed stream");
    *xp = x;
    return c;
}

/* The client is gone or stuck: the response cannot go on. */
NORETURN(static void stream_gone(struct oribi_exchange *x, int err));
static void stream_gone(struct oribi_exchange *x, int err)
{
    if (x->resp)
        x->resp->gone = 1;
    rb_syserr_fail(err, "client connection");
}

static void check_gone(struct oribi_exchange *x)
{
    if (x->resp && x->resp->gone)
        stream_gone(x, EPIPE);
}

/* ---- reading ---- */

/* Up to max bytes into dst: read-ahead bytes first, then the socket.
 * Returns the count, 0 at EOF, -1 when nothing is there and !block. */
static long read_some(VALUE self, char *dst, long max, int block)
{
    struct oribi_exchange *x;
    struct oribi_conn *c = stream_conn(self, &x, 0);
    if (c->len > c->rest_off) {
        size_t n = c->len - c->rest_off;
        if (n > (size_t)max)
            n = (size_t)max;
        memcpy(dst, c->buf + c->rest_off, n);
        c->rest_off += n;
        return (long)n;
    }
    for (;;) {
        ssize_t n = oribi_io_read(c, dst, (size_t)max);
        if (n >= 0)
            return (long)n;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN)
            rb_syserr_fail(errno, "client connection");
        if (!block)
            return -1;
        if (!oribi_exchange_wait(c->fd, RB_WAITFD_IN, x->opt->body_timeout_ms))
            rb_syserr_fail(ETIMEDOUT, "no bytes from the client within body_timeout");
        c = stream_conn(self, &x, 0); /* other threads ran meanwhile */
    }
}

static VALUE out_buffer(VALUE buf, long capa)
{
    if (NIL_P(buf))
        return rb_str_buf_new(capa);
    StringValue(buf);
    rb_str_modify(buf);
    rb_str_set_len(buf, 0);
    return buf;
}

static long read_len(VALUE len)
{
    long n = NUM2LONG(len);
    if (n < 0)
        rb_raise(rb_eArgError, "negative length %ld given", n);
    return n;
}

/* read(length = nil, buffer = nil): IO#read — all until EOF, or up to
 * length bytes (nil at EOF). */
static VALUE stream_read(int argc, VALUE *argv, VALUE self)
{
    VALUE vlen, buf;
    rb_scan_args(argc, argv, "02", &vlen, &buf);
    long want = NIL_P(vlen) ? -1 : read_len(vlen);
    buf = out_buffer(buf, want > 0 && want < 16384 ? want : 16384);
    long got = 0;
    while (want < 0 || got < want) {
        long room = want < 0 ? 16384 : want - got;
        rb_str_modify_expand(buf, room);
        long n = read_some(self, RSTRING_PTR(buf) + got, room, 1);
        if (n == 0)
            break;
        got += n;
        rb_str_set_len(buf, got);
    }
    rb_enc_associate(buf, rb_ascii8bit_encoding());
    return got == 0 && want > 0 ? Qnil : buf;
}

static VALUE read_partial(int argc, VALUE *argv, VALUE self, int block)
{
    VALUE vlen, buf, opts;
    rb_scan_args(argc, argv, "11:", &vlen, &buf, &opts);
    long want = read_len(vlen);
    int exception = 1;
    if (!NIL_P(opts)) {
        VALUE ex;
        rb_get_kwargs(opts, &id_exception, 0, 1, &ex);
        exception = ex == Qundef || RTEST(ex);
    }
    buf = out_buffer(buf, want);
    if (want == 0)
        return buf;
    rb_str_modify_expand(buf, want);
    long n = read_some(self, RSTRING_PTR(buf), want, block);
    if (n < 0) {
        if (!exception)
            return ID2SYM(id_wait_readable);
        rb_readwrite_syserr_fail(RB_IO_WAIT_READABLE, EAGAIN, "read would block");
    }
    if (n == 0) {
        if (!exception)
            return Qnil;
        rb_eof_error();
    }
    rb_str_set_len(buf, n);
    rb_enc_associate(buf, rb_ascii8bit_encoding());
    return buf;
}

/* readpartial(maxlen, buffer = nil): waits for some bytes; EOFError at the end. */
static VALUE stream_readpartial(int argc, VALUE *argv, VALUE self)
{
    return read_partial(argc, argv, self, 1);
}

/* read_nonblock(maxlen, buffer = nil, exception: true) */
static VALUE stream_read_nonblock(int argc, VALUE *argv, VALUE self)
{
    return read_partial(argc, argv, self, 0);
}

/* ---- writing ---- */

static void write_all(VALUE self, VALUE str)
{
    /* A frozen view: other threads run while we wait and cannot change
     * the bytes under us. */
    str = rb_str_new_frozen(str);
    long off = 0, len = RSTRING_LEN(str);
    while (off < len) {
        struct oribi_exchange *x;
        struct oribi_conn *c = stream_conn(self, &x, 1);
        check_gone(x);
        long n = len - off > STREAM_WRITE_SLICE ? STREAM_WRITE_SLICE : len - off;
        struct iovec iov = {RSTRING_PTR(str) + off, (size_t)n};
        if (oribi_conn_write(c, &iov, 1) < 0)
            stream_gone(x, EPIPE);
        int d = oribi_exchange_drain(x, c);
        if (d < 0) {
            stream_conn(self, &x, 1); /* IOError if the response ended meanwhile */
            stream_gone(x, d == -2 ? ETIMEDOUT : EPIPE);
        }
        if (x->resp)
            x->resp->sent += n;
        off += n;
    }
    RB_GC_GUARD(str);
}

/* write(*objects) → bytes written; every byte is in the kernel on return. */
static VALUE stream_write(int argc, VALUE *argv, VALUE self)
{
    long total = 0;
    for (int i = 0; i < argc; i++) {
        VALUE str = rb_obj_as_string(argv[i]);
        write_all(self, str);
        total += RSTRING_LEN(str);
    }
    if (argc == 0) {
        struct oribi_exchange *x;
        stream_conn(self, &x, 1);
    }
    return LONG2NUM(total);
}

static VALUE stream_append(VALUE self, VALUE obj)
{
    write_all(self, rb_obj_as_string(obj));
    return self;
}

/* write_nonblock(string, exception: true) → bytes the socket took now. */
static VALUE stream_write_nonblock(int argc, VALUE *argv, VALUE self)
{
    VALUE str, opts;
    rb_scan_args(argc, argv, "1:", &str, &opts);
    int exception = 1;
    if (!NIL_P(opts)) {
        VALUE ex;
        rb_get_kwargs(opts, &id_exception, 0, 1, &ex);
        exception = ex == Qundef || RTEST(ex);
    }
    str = rb_obj_as_string(str);
    struct oribi_exchange *x;
    struct oribi_conn *c = stream_conn(self, &x, 1);
    check_gone(x);
    ssize_t n = -1;
    if (oribi_conn_flush(c) < 0)
        stream_gone(x, EPIPE);
    if (c->wlen == c->woff) {
        do {
            n = oribi_io_write(c, RSTRING_PTR(str), (size_t)RSTRING_LEN(str));
        } while (n < 0 && errno == EINTR);
        if (n < 0 && errno != EAGAIN)
            stream_gone(x, errno);
    }
    if (n < 0) {
        if (!exception)
            return ID2SYM(id_wait_writable);
        rb_readwrite_syserr_fail(RB_IO_WAIT_WRITABLE, EAGAIN, "write would block");
    }
    return LONG2NUM((long)n);
}

/* Writes are not buffered by the stream: nothing to flush. */
static VALUE stream_flush(VALUE self)
{
    struct oribi_exchange *x;
    stream_conn(self, &x, 1);
    return self;
}

/* ---- closing ---- */

/* Ends the response body: the client sees EOF (the server closes the
 * connection after the body returns in any case). A client that is gone,
 * or whose write timed out, is dead: nothing is waited for. */
static VALUE stream_close_write(VALUE self)
{
    struct stream *s = rb_check_typeddata(self, &stream_type);
    if (s->write_closed)
        return Qnil;
    struct oribi_exchange *x = stream_exchange(self);
    struct oribi_conn *c = x->stream == self ? oribi_exchange_conn(x) : NULL;
    s->write_closed = 1;
    if (c && !(x->resp && x->resp->gone) && oribi_exchange_drain(x, c) == 0)
        oribi_io_shutdown(c);
    return Qnil;
}

static VALUE stream_close_read(VALUE self)
{
    struct stream *s = rb_check_typeddata(self, &stream_type);
    s->read_closed = 1;
    return Qnil;
}

static VALUE stream_close(VALUE self)
{
    stream_close_write(self);
    return stream_close_read(self);
}

static VALUE stream_closed_p(VALUE self)
{
    struct stream *s = rb_check_typeddata(self, &stream_type);
    return s->read_closed && s->write_closed ? Qtrue : Qfalse;
}

void Init_oribi_stream(VALUE mOribi)
{
    id_exception = rb_intern("exception");
    id_wait_readable = rb_intern("wait_readable");
    id_wait_writable = rb_intern("wait_writable");
    cStream = rb_define_class_under(mOribi, "Stream", rb_cObject);
    rb_undef_alloc_func(cStream);
    rb_define_method(cStream, "read", stream_read, -1);
    rb_define_method(cStream, "readpartial", stream_readpartial, -1);
    rb_define_method(cStream, "read_nonblock", stream_read_nonblock, -1);
    rb_define_method(cStream, "write", stream_write, -1);
    rb_define_method(cStream, "write_nonblock", stream_write_nonblock, -1);
    rb_define_method(cStream, "<<", stream_append, 1);
    rb_define_method(cStream, "flush", stream_flush, 0);
    rb_define_method(cStream, "close", stream_close, 0);
    rb_define_method(cStream, "close_read", stream_close_read, 0);
    rb_define_method(cStream, "close_write", stream_close_write, 0);
    rb_define_method(cStream, "closed?", stream_closed_p, 0);
}
