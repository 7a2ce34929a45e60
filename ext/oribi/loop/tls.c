/* TLS over a connection's socket (tls.h). */
#include "loop/tls.h"
#include "loop/conn.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "os/socket.h"

#ifdef ORIBI_HAVE_OPENSSL
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

/* Small pieces of a response (a head, chunk framing, a short body) leave
 * in one record rather than one each: gathered here first, a buffer per
 * thread that writes (the loop's, each app thread's), never on a stack
 * (a fiber's keeps every page it touched). A TLS record's plaintext. */
#define GATHER 16384
static __thread char *gather;

/* The socket under TLS, as OpenSSL's own socket BIO is but for two
 * things: a read that got fewer bytes than it asked for says the socket is
 * drained (oribi_tls_io.drained), so that the loop does not read once more to
 * learn it (read-ahead takes what is there in one read); and writes are
 * MSG_NOSIGNAL sends. */
static BIO_METHOD *sock_method;
static pthread_once_t sock_method_once = PTHREAD_ONCE_INIT;

static int sock_read(BIO *b, char *buf, int len)
{
    struct oribi_tls_io *c = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    if (c->pre) { /* what came behind a PROXY header first */
        size_t n = c->pre_len - c->pre_off;
        if (n > (size_t)len)
            n = (size_t)len;
        memcpy(buf, c->pre + c->pre_off, n);
        c->pre_off += n;
        if (c->pre_off == c->pre_len) {
            free(c->pre);
            c->pre = NULL;
        }
        c->drained = 0; /* the socket may hold more */
        return (int)n;
    }
    ssize_t n;
    do {
        n = read(c->fd, buf, (size_t)len);
    } while (n < 0 && errno == EINTR);
    c->drained = n < len;
    if (n < 0 && errno == EAGAIN)
        BIO_set_retry_read(b);
    return (int)n;
}

static int sock_write(BIO *b, const char *buf, int len)
{
    struct oribi_tls_io *c = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    ssize_t n;
    do {
        n = send(c->fd, buf, (size_t)len, ORIBI_MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && errno == EAGAIN)
        BIO_set_retry_write(b);
    return (int)n;
}

static long sock_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)b;
    (void)num;
    (void)ptr;
    return cmd == BIO_CTRL_FLUSH; /* writes are not buffered here; nothing else is known */
}

static void make_sock_method(void)
{
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "oribi socket");
    if (m && BIO_meth_set_read(m, sock_read) && BIO_meth_set_write(m, sock_write) && BIO_meth_set_ctrl(m, sock_ctrl))
        sock_method = m;
}

int oribi_tls_start(struct oribi_conn *c, struct ssl_ctx_st *ctx)
{
    pthread_once(&sock_method_once, make_sock_method);
    SSL *s = sock_method ? SSL_new(ctx) : NULL;
    BIO *b = s ? BIO_new(sock_method) : NULL;
    if (!b) {
        SSL_free(s);
        ERR_clear_error();
        return -1;
    }
    c->tio = (struct oribi_tls_io){.fd = c->fd};
    BIO_set_data(b, &c->tio);
    BIO_set_init(b, 1);
    SSL_set_bio(s, b, b); /* one BIO both ways: SSL_free frees it once */
    SSL_set_accept_state(s);
    c->tls = s;
    c->plain_on_tls = 0;
    return 0;
}

int oribi_tls_drained(const struct oribi_conn *c)
{
    return c->tio.drained && !SSL_has_pending(c->tls);
}

struct ssl_st *oribi_tls_take(struct oribi_conn *c, struct oribi_tls_io *io)
{
    SSL *s = c->tls;
    *io = c->tio;
    BIO_set_data(SSL_get_rbio(s), io);
    c->tls = NULL;
    c->tio.pre = NULL;
    return s;
}

char *oribi_tls_peer_pem(const struct oribi_conn *c, size_t *len)
{
    X509 *cert = SSL_get0_peer_certificate(c->tls);
    if (!cert)
        return NULL;
    BIO *b = BIO_new(BIO_s_mem());
    char *out = NULL, *p;
    if (b && PEM_write_bio_X509(b, cert) == 1) {
        long n = BIO_get_mem_data(b, &p);
        if (n > 0 && (out = malloc((size_t)n))) {
            memcpy(out, p, (size_t)n);
            *len = (size_t)n;
        }
    }
    BIO_free(b);
    ERR_clear_error();
    return out;
}

int oribi_tls_preread(struct oribi_conn *c, const char *p, size_t n)
{
    char *copy = malloc(n);
    if (!copy)
        return -1;
    memcpy(copy, p, n);
    free(c->tio.pre);
    c->tio.pre = copy;
    c->tio.pre_len = n;
    c->tio.pre_off = 0;
    return 0;
}

void oribi_tls_free(struct oribi_conn *c)
{
    free(c->tio.pre);
    c->tio.pre = NULL;
    if (!c->tls)
        return;
    /* Closed without close_notify (or after ours) is still an end: OpenSSL
     * would otherwise drop the session from the cache (TLS 1.2 resumption
     * by session id). A fatal error has dropped it already. */
    SSL_set_shutdown(c->tls, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    SSL_free(c->tls);
    c->tls = NULL;
}

/* What an SSL call that returned r <= 0 means, as a syscall would say it:
 * 0 for the peer's end, else -1 with errno (EAGAIN: the socket first). The
 * thread's error queue is left empty, as the next call on any connection
 * needs it. */
static ssize_t failed(struct oribi_conn *c, int r)
{
    int err = SSL_get_error(c->tls, r);
    ssize_t ret = -1;
    switch (err) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        errno = EAGAIN;
        break;
    case SSL_ERROR_ZERO_RETURN: /* close_notify */
        ret = 0;
        break;
    case SSL_ERROR_SYSCALL:
        if (errno == 0 || errno == EAGAIN)
            errno = ECONNRESET;
        break;
    default: {
        unsigned long e = ERR_peek_error();
        if (ERR_GET_LIB(e) == ERR_LIB_SSL &&
            (ERR_GET_REASON(e) == SSL_R_HTTP_REQUEST || ERR_GET_REASON(e) == SSL_R_HTTPS_PROXY_REQUEST))
            c->plain_on_tls = 1;
        errno = EPROTO;
    }
    }
    ERR_clear_error();
    return ret;
}

ssize_t oribi_tls_read(struct oribi_conn *c, void *buf, size_t n)
{
    int want = n > INT32_MAX ? INT32_MAX : (int)n;
    errno = 0;
    int r = SSL_read(c->tls, buf, want);
    return r > 0 ? r : failed(c, r);
}

/* n bytes as records until the socket is full: a short count then (a
 * record is written whole or is pending in TLS, to go with the next write). */
static ssize_t write_some(struct oribi_conn *c, const char *p, size_t n)
{
    size_t done = 0;
    while (done < n) {
        size_t left = n - done;
        errno = 0;
        int r = SSL_write(c->tls, p + done, left > (1 << 30) ? 1 << 30 : (int)left);
        if (r <= 0) {
            ssize_t f = failed(c, r);
            return done ? (ssize_t)done : f;
        }
        done += (size_t)r;
    }
    return (ssize_t)done;
}

static char *gather_buf(void)
{
    if (!gather)
        gather = malloc(GATHER);
    return gather;
}

/* A write TLS could not finish is written again with the same first bytes
 * and no fewer of them (SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER lets them move):
 * what is not counted as written here is what the caller keeps and offers
 * next, from its first byte. */
ssize_t oribi_tls_writev(struct oribi_conn *c, const struct iovec *iov, int iovcnt)
{
    ssize_t total = 0;
    int i = 0;
    size_t off = 0; /* into iov[i] */
    while (i < iovcnt) {
        size_t left = iov[i].iov_len - off;
        if (!left) {
            i++;
            off = 0;
            continue;
        }
        const char *p = (const char *)iov[i].iov_base + off;
        size_t n = left;
        char *g = left < GATHER ? gather_buf() : NULL;
        if (g) { /* small pieces in a row: one record */
            n = 0;
            int j = i;
            size_t o = off;
            while (j < iovcnt && n < GATHER) {
                size_t take = iov[j].iov_len - o;
                if (take > GATHER - n)
                    take = GATHER - n;
                memcpy(g + n, (const char *)iov[j].iov_base + o, take);
                n += take;
                o += take;
                if (o == iov[j].iov_len) {
                    j++;
                    o = 0;
                }
            }
            p = g;
        }
        ssize_t w = write_some(c, p, n);
        if (w < 0)
            return total ? total : -1;
        total += w;
        /* advance over w bytes of the iovs */
        size_t adv = (size_t)w;
        while (adv && i < iovcnt) {
            size_t here = iov[i].iov_len - off;
            if (adv < here) {
                off += adv;
                adv = 0;
            } else {
                adv -= here;
                i++;
                off = 0;
            }
        }
        if ((size_t)w < n)
            return total;
    }
    return total;
}

ssize_t oribi_tls_sendfile(struct oribi_conn *c, int fd, int64_t *off, size_t n)
{
    char *g = gather_buf();
    if (!g) {
        errno = ENOMEM;
        return -1;
    }
    ssize_t total = 0;
    while ((size_t)total < n) {
        size_t want = n - (size_t)total < GATHER ? n - (size_t)total : GATHER;
        ssize_t got = pread(fd, g, want, (off_t)*off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            if (total)
                return total;
            if (got == 0)
                return 0; /* the file ended */
            return -1;
        }
        ssize_t w = write_some(c, g, (size_t)got);
        if (w < 0)
            return total ? total : -1;
        *off += w;
        total += w;
        if (w < got)
            break;
    }
    return total;
}

int oribi_tls_shutdown(struct oribi_conn *c)
{
    if (SSL_is_init_finished(c->tls))
        SSL_shutdown(c->tls); /* close_notify; the peer's is not waited for */
    ERR_clear_error();
    return shutdown(c->fd, SHUT_WR);
}

int oribi_tls_handshaking(const struct oribi_conn *c)
{
    return !SSL_is_init_finished(c->tls);
}

#else /* no OpenSSL: no TLS listener, so none of these is reached */

int oribi_tls_start(struct oribi_conn *c, struct ssl_ctx_st *ctx)
{
    (void)c;
    (void)ctx;
    errno = ENOTSUP;
    return -1;
}

int oribi_tls_preread(struct oribi_conn *c, const char *p, size_t n)
{
    (void)c;
    (void)p;
    (void)n;
    errno = ENOTSUP;
    return -1;
}

struct ssl_st *oribi_tls_take(struct oribi_conn *c, struct oribi_tls_io *io)
{
    (void)c;
    (void)io;
    return NULL;
}

void oribi_tls_free(struct oribi_conn *c)
{
    c->tls = NULL;
}

ssize_t oribi_tls_read(struct oribi_conn *c, void *buf, size_t n)
{
    return read(c->fd, buf, n);
}

ssize_t oribi_tls_writev(struct oribi_conn *c, const struct iovec *iov, int iovcnt)
{
    return writev(c->fd, iov, iovcnt);
}

ssize_t oribi_tls_sendfile(struct oribi_conn *c, int fd, int64_t *off, size_t n)
{
    (void)c;
    (void)fd;
    (void)off;
    (void)n;
    errno = ENOTSUP;
    return -1;
}

int oribi_tls_shutdown(struct oribi_conn *c)
{
    return shutdown(c->fd, SHUT_WR);
}

int oribi_tls_handshaking(const struct oribi_conn *c)
{
    (void)c;
    return 0;
}

int oribi_tls_drained(const struct oribi_conn *c)
{
    (void)c;
    return 1;
}

char *oribi_tls_peer_pem(const struct oribi_conn *c, size_t *len)
{
    (void)c;
    *len = 0;
    return NULL;
}

#endif
