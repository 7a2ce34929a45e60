/*
 * Oribi::TLSSocket: what a hijack hands the app on a TLS connection, in
 * place of the TCPSocket a plain one gets. The socket carries TLS records,
 * not the app's bytes, so the app reads and writes through this object,
 * which holds the connection's TLS from then on: read_nonblock, readpartial,
 * read, write_nonblock, write, close, to_io (the socket, for IO.select and
 * nio4r: Action Cable's event loop), wait_readable. Bytes the client sent
 * behind the request come first, as on a plain hijack. The GVL is held over
 * every TLS call, so threads that share it (a reader and a writer) take
 * turns; a blocking read or write waits on the socket without it.
 */
#include <errno.h>
#include <ruby.h>
#include <ruby/io.h>
#include <string.h>

#include "ruby/tls_socket.h"

static VALUE cTLSSocket, cTCPSocket;
static ID id_for_fd, id_close, id_closed_p;

#ifdef ORIBI_HAVE_OPENSSL
#include <openssl/err.h>
#include <openssl/ssl.h>

struct tls_socket {
    SSL *ssl;
    struct oribi_tls_io io; /* the BIO's, here for the TLS's life */
    VALUE raw;              /* the socket as a TCPSocket: to_io, and its close */
    VALUE ahead;            /* plaintext read before the hijack, given first */
    int closed;
};

static void sock_mark(void *p)
{
    struct tls_socket *t = p;
    rb_gc_mark(t->raw);
    rb_gc_mark(t->ahead);
}

static void sock_free(void *p)
{
    struct tls_socket *t = p;
    if (t->ssl) {
        SSL_set_shutdown(t->ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
        SSL_free(t->ssl); /* the socket itself is raw's to close */
    }
    free(t->io.pre);
    xfree(t);
}

static const rb_data_type_t sock_type = {
    "Oribi::TLSSocket", {sock_mark, sock_free, NULL}, NULL, NULL, RUBY_TYPED_FREE_IMMEDIATELY,
};

static struct tls_socket *open_sock(VALUE self)
{
    struct tls_socket *t = rb_check_typeddata(self, &sock_type);
    if (t->closed)
        rb_raise(rb_eIOError, "closed stream");
    return t;
}

VALUE oribi_tls_socket(struct oribi_conn *c, VALUE ahead)
{
    struct tls_socket *t;
    VALUE self = TypedData_Make_Struct(cTLSSocket, struct tls_socket, &sock_type, t);
    t->raw = t->ahead = Qnil;
    t->raw = rb_funcall(cTCPSocket, id_for_fd, 1, INT2FIX(c->fd));
    t->ssl = oribi_tls_take(c, &t->io);
    t->ahead = NIL_P(ahead) ? Qnil : ahead;
    return self;
}

enum { WAIT_NONE, WAIT_READ, WAIT_WRITE, AT_EOF };

/* The count, or 0 with *wait saying why not. Raises on a broken connection. */
static long tls_io(struct tls_socket *t, int write, char *p, long n, int *wait)
{
    *wait = WAIT_NONE;
    ERR_clear_error();
    errno = 0;
    int r = write ? SSL_write(t->ssl, p, (int)n) : SSL_read(t->ssl, p, (int)n);
    if (r > 0)
        return r;
    int e = SSL_get_error(t->ssl, r);
    ERR_clear_error();
    if (e == SSL_ERROR_WANT_READ)
        *wait = WAIT_READ;
    else if (e == SSL_ERROR_WANT_WRITE)
        *wait = WAIT_WRITE;
    else if (e == SSL_ERROR_ZERO_RETURN || (!write && e == SSL_ERROR_SYSCALL && errno == 0))
        *wait = AT_EOF;
    else
        rb_syserr_fail(errno ? errno : EPIPE, write ? "TLS write" : "TLS read");
    return 0;
}

static void wait_for(struct tls_socket *t, int wait)
{
    rb_io_wait(t->raw, RB_INT2NUM(wait == WAIT_WRITE ? RUBY_IO_WRITABLE : RUBY_IO_READABLE), Qnil);
}

static VALUE out_buf(VALUE buf, long len)
{
    if (NIL_P(buf))
        return rb_str_buf_new(len);
    StringValue(buf);
    rb_str_modify_expand(buf, len);
    return buf;
}

/* Up to len bytes: the ones read ahead first. Qnil at EOF, Qfalse to wait
 * (*wait says for what). */
static VALUE read_some(struct tls_socket *t, long len, VALUE buf, int *wait)
{
    *wait = WAIT_NONE;
    buf = out_buf(buf, len);
    if (!NIL_P(t->ahead) && RSTRING_LEN(t->ahead)) {
        long n = RSTRING_LEN(t->ahead) < len ? RSTRING_LEN(t->ahead) : len;
        memcpy(RSTRING_PTR(buf), RSTRING_PTR(t->ahead), (size_t)n);
        rb_str_set_len(buf, n);
        t->ahead = RSTRING_LEN(t->ahead) > n ? rb_str_substr(t->ahead, n, RSTRING_LEN(t->ahead) - n) : Qnil;
        return buf;
    }
    long n = tls_io(t, 0, RSTRING_PTR(buf), len, wait);
    if (*wait == AT_EOF)
        return Qnil;
    if (*wait)
        return Qfalse;
    rb_str_set_len(buf, n);
    return buf;
}

static VALUE sock_read_nonblock(int argc, VALUE *argv, VALUE self)
{
    VALUE len, buf, opts;
    rb_scan_args(argc, argv, "11:", &len, &buf, &opts);
    int exception = NIL_P(opts) || rb_hash_lookup2(opts, ID2SYM(rb_intern("exception")), Qtrue) != Qfalse;
    int wait;
    VALUE r = read_some(open_sock(self), NUM2LONG(len), buf, &wait);
    if (r == Qfalse) {
        if (!exception)
            return ID2SYM(rb_intern(wait == WAIT_WRITE ? "wait_writable" : "wait_readable"));
        rb_readwrite_syserr_fail(wait == WAIT_WRITE ? RB_IO_WAIT_WRITABLE : RB_IO_WAIT_READABLE, EAGAIN,
                                 "read would block");
    }
    if (NIL_P(r)) {
        if (!exception)
            return Qnil;
        rb_eof_error();
    }
    return r;
}

static VALUE sock_readpartial(int argc, VALUE *argv, VALUE self)
{
    VALUE len, buf;
    rb_scan_args(argc, argv, "11", &len, &buf);
    for (;;) {
        struct tls_socket *t = open_sock(self);
        int wait;
        VALUE r = read_some(t, NUM2LONG(len), buf, &wait);
        if (NIL_P(r))
            rb_eof_error();
        if (r != Qfalse)
            return r;
        wait_for(t, wait);
    }
}

/* read(len = nil): len bytes (fewer at EOF, nil if none), or all to EOF. */
static VALUE sock_read(int argc, VALUE *argv, VALUE self)
{
    VALUE len;
    rb_scan_args(argc, argv, "01", &len);
    VALUE out = rb_str_buf_new(0);
    long want = NIL_P(len) ? -1 : NUM2LONG(len);
    while (want < 0 || RSTRING_LEN(out) < want) {
        struct tls_socket *t = open_sock(self);
        int wait;
        long room = want < 0 ? 16384 : want - RSTRING_LEN(out);
        VALUE r = read_some(t, room, Qnil, &wait);
        if (NIL_P(r))
            break;
        if (r == Qfalse)
            wait_for(t, wait);
        else
            rb_str_buf_append(out, r);
    }
    return RSTRING_LEN(out) == 0 && want > 0 ? Qnil : out;
}

static VALUE sock_write_nonblock(int argc, VALUE *argv, VALUE self)
{
    VALUE str, opts;
    rb_scan_args(argc, argv, "1:", &str, &opts);
    int exception = NIL_P(opts) || rb_hash_lookup2(opts, ID2SYM(rb_intern("exception")), Qtrue) != Qfalse;
    str = rb_obj_as_string(str);
    if (RSTRING_LEN(str) == 0)
        return INT2FIX(0);
    int wait;
    long n = tls_io(open_sock(self), 1, RSTRING_PTR(str), RSTRING_LEN(str), &wait);
    if (wait) {
        if (!exception)
            return ID2SYM(rb_intern(wait == WAIT_READ ? "wait_readable" : "wait_writable"));
        rb_readwrite_syserr_fail(wait == WAIT_READ ? RB_IO_WAIT_READABLE : RB_IO_WAIT_WRITABLE, EAGAIN,
                                 "write would block");
    }
    return LONG2NUM(n);
}

/* write(*objects): every byte given to TLS (and the socket) on return. */
static VALUE sock_write(int argc, VALUE *argv, VALUE self)
{
    long total = 0;
    for (int i = 0; i < argc; i++) {
        VALUE str = rb_obj_as_string(argv[i]);
        long off = 0;
        while (off < RSTRING_LEN(str)) {
            struct tls_socket *t = open_sock(self);
            int wait;
            long n = tls_io(t, 1, RSTRING_PTR(str) + off, RSTRING_LEN(str) - off, &wait);
            if (wait)
                wait_for(t, wait);
            off += n;
        }
        total += off;
    }
    return LONG2NUM(total);
}

static VALUE sock_append(VALUE self, VALUE obj)
{
    sock_write(1, &obj, self);
    return self;
}

static VALUE sock_flush(VALUE self)
{
    open_sock(self);
    return self;
}

static VALUE sock_sync(VALUE self)
{
    (void)self;
    return Qtrue;
}

static VALUE sock_set_sync(VALUE self, VALUE v)
{
    (void)self;
    return v;
}

/* close_notify, then the socket closed. */
static VALUE sock_close(VALUE self)
{
    struct tls_socket *t = rb_check_typeddata(self, &sock_type);
    if (t->closed)
        return Qnil;
    t->closed = 1;
    SSL_shutdown(t->ssl);
    ERR_clear_error();
    if (!RTEST(rb_funcall(t->raw, id_closed_p, 0)))
        rb_funcall(t->raw, id_close, 0);
    return Qnil;
}

static VALUE sock_closed_p(VALUE self)
{
    return ((struct tls_socket *)rb_check_typeddata(self, &sock_type))->closed ? Qtrue : Qfalse;
}

static VALUE sock_to_io(VALUE self)
{
    return ((struct tls_socket *)rb_check_typeddata(self, &sock_type))->raw;
}

static VALUE sock_fileno(VALUE self)
{
    return rb_funcall(sock_to_io(self), rb_intern("fileno"), 0);
}

/* wait_readable(timeout = nil): self once bytes can be read (TLS may hold
 * some already), nil after timeout. */
static VALUE sock_wait_readable(int argc, VALUE *argv, VALUE self)
{
    VALUE timeout;
    rb_scan_args(argc, argv, "01", &timeout);
    struct tls_socket *t = open_sock(self);
    if ((!NIL_P(t->ahead) && RSTRING_LEN(t->ahead)) || SSL_pending(t->ssl) > 0)
        return self;
    return RTEST(rb_io_wait(t->raw, RB_INT2NUM(RUBY_IO_READABLE), timeout)) ? self : Qnil;
}

void Init_oribi_tls_socket(VALUE mOribi)
{
    rb_require("socket");
    cTCPSocket = rb_const_get(rb_cObject, rb_intern("TCPSocket"));
    id_for_fd = rb_intern("for_fd");
    id_close = rb_intern("close");
    id_closed_p = rb_intern("closed?");
    cTLSSocket = rb_define_class_under(mOribi, "TLSSocket", rb_cObject);
    rb_undef_alloc_func(cTLSSocket);
    rb_define_method(cTLSSocket, "read_nonblock", sock_read_nonblock, -1);
    rb_define_method(cTLSSocket, "readpartial", sock_readpartial, -1);
    rb_define_method(cTLSSocket, "read", sock_read, -1);
    rb_define_method(cTLSSocket, "write_nonblock", sock_write_nonblock, -1);
    rb_define_method(cTLSSocket, "write", sock_write, -1);
    rb_define_method(cTLSSocket, "<<", sock_append, 1);
    rb_define_method(cTLSSocket, "flush", sock_flush, 0);
    rb_define_method(cTLSSocket, "sync", sock_sync, 0);
    rb_define_method(cTLSSocket, "sync=", sock_set_sync, 1);
    rb_define_method(cTLSSocket, "close", sock_close, 0);
    rb_define_method(cTLSSocket, "closed?", sock_closed_p, 0);
    rb_define_method(cTLSSocket, "to_io", sock_to_io, 0);
    rb_define_method(cTLSSocket, "fileno", sock_fileno, 0);
    rb_define_method(cTLSSocket, "wait_readable", sock_wait_readable, -1);
}

#else /* no OpenSSL: no TLS connection to hijack */

VALUE oribi_tls_socket(struct oribi_conn *c, VALUE ahead)
{
    (void)c;
    (void)ahead;
    rb_raise(rb_eNotImpError, "no TLS in this build");
}

void Init_oribi_tls_socket(VALUE mOribi)
{
    (void)cTCPSocket;
    (void)id_for_fd;
    (void)id_close;
    (void)id_closed_p;
    cTLSSocket = rb_define_class_under(mOribi, "TLSSocket", rb_cObject);
}

#endif
