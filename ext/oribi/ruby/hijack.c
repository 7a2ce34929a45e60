/*
 * Hijacking: the app takes the socket. Full hijack (env["rack.hijack"].call)
 * happens while the app runs, before any response; partial hijack (a
 * rack.hijack response header) after the server wrote the head (rack_response.c).
 * Either way the app gets a real IO (TCPSocket or UNIXSocket; on a TLS
 * connection an Oribi::TLSSocket, tls_socket.c) and the loop forgets the
 * connection without closing it.
 *
 * The loop reads ahead: bytes the client sent after the request (the first
 * WebSocket frame right behind the upgrade request) may already sit in the
 * conn's buffer. They are pushed back into the IO's read buffer
 * (IO#ungetbyte), so read, readpartial, read_nonblock, gets, IO.select and
 * wait_readable see them first, as if they had come from the socket.
 */
#include <ruby.h>
#include <sys/socket.h>

#include "ruby/handback.h"
#include "ruby/hijack.h"
#include "ruby/tls_socket.h"

static VALUE cTCPSocket, cUNIXSocket;
static ID id_for_fd, id_ungetbyte;

VALUE oribi_hijack_io(struct oribi_exchange *x, struct oribi_conn *c)
{
    /* An early hint or 100 Continue may still be kept: it goes first. */
    if (oribi_exchange_drain(x, c) < 0)
        rb_raise(oribi_eClientGone, "the client went away");
    int is_unix = x->ctx.listeners[c->listener].is_unix || c->peer.ss_family == AF_UNIX;
    VALUE ahead = c->len > c->rest_off ? rb_str_new(c->buf + c->rest_off, (long)(c->len - c->rest_off)) : Qnil;
    /* Under TLS the socket carries records: the app gets an object that
     * takes the connection's TLS over, and the bytes read ahead. */
    int tls = c->tls != NULL;
    VALUE io =
        tls ? oribi_tls_socket(c, ahead) : rb_funcall(is_unix ? cUNIXSocket : cTCPSocket, id_for_fd, 1, INT2FIX(c->fd));
    oribi_handback_detach(x->hb, c);
    x->c = NULL;
    x->io = io;
    x->phase = PHASE_HIJACKED;
    if (!NIL_P(ahead) && !tls)
        rb_funcall(io, id_ungetbyte, 1, ahead);
    return io;
}

/* env["rack.hijack"].call: only while the app runs, before the response;
 * a second call returns the same IO. Once its request is over it raises,
 * whatever request its app thread serves now. */
VALUE oribi_full_hijack(VALUE ticket)
{
    struct oribi_exchange *x = oribi_ticket_exchange(ticket, TICKET_HIJACK);
    if (!x)
        rb_raise(rb_eIOError, "rack.hijack: its request is over (each request's env has its own)");
    if (x->phase == PHASE_HIJACKED)
        return x->io;
    struct oribi_conn *c = x->phase == PHASE_APP ? oribi_exchange_conn(x) : NULL;
    if (!c)
        rb_raise(rb_eIOError, "rack.hijack: no request in the app (the response has started or is over)");
    return oribi_hijack_io(x, c);
}

void Init_oribi_hijack(void)
{
    rb_require("socket");
    cTCPSocket = rb_const_get(rb_cObject, rb_intern("TCPSocket"));
    cUNIXSocket = rb_const_get(rb_cObject, rb_intern("UNIXSocket"));
    id_for_fd = rb_intern("for_fd");
    id_ungetbyte = rb_intern("ungetbyte");
}
