/* TLS for the load generator: see loadgen_tls.h. */
#include "loadgen_tls.h"
#include <errno.h>
#include <stdio.h>
#include <string.h>

#ifdef ORIBI_TLS
#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdlib.h>

struct lg_tls {
    SSL_CTX *ctx;
    char *name; /* SNI and the certificate's name; NULL: none */
    int ip;     /* name is an IP literal: no SNI, the certificate's IP is checked */
    int insecure;
    int resume;
    pthread_mutex_t lock;   /* session, across the run's threads */
    SSL_SESSION *session;   /* the last one the server gave, else NULL */
    uint64_t resumed, done; /* handshakes (resume only) */
};

int lg_tls_available(void)
{
    return 1;
}

static int is_ip(const char *s)
{
    unsigned char buf[16];
    return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

struct lg_tls *lg_tls_new(const char *server_name, int insecure, int resume, char *err, size_t errlen)
{
    struct lg_tls *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&t->lock, NULL);
    t->resume = resume;
    t->ctx = SSL_CTX_new(TLS_client_method());
    t->name = server_name && *server_name ? strdup(server_name) : NULL;
    if (t->ctx == NULL || (server_name && *server_name && t->name == NULL)) {
        snprintf(err, errlen, "cannot set up TLS: %s", ERR_reason_error_string(ERR_get_error()));
        lg_tls_free(t);
        return NULL;
    }
    t->ip = t->name && is_ip(t->name);
    t->insecure = insecure;
    SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
    /* A write that could not finish is retried from another place in the
     * same buffer, and a large one may go out in parts, as send() does. */
    SSL_CTX_set_mode(t->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    if (resume)
        SSL_CTX_set_app_data(t->ctx, t);
    if (!insecure) {
        SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
        if (SSL_CTX_set_default_verify_paths(t->ctx) != 1) {
            snprintf(err, errlen, "cannot load the system's CA certificates");
            lg_tls_free(t);
            return NULL;
        }
    }
    return t;
}

void lg_tls_resumed(struct lg_tls *t, uint64_t *resumed, uint64_t *done)
{
    *resumed = __atomic_load_n(&t->resumed, __ATOMIC_RELAXED);
    *done = __atomic_load_n(&t->done, __ATOMIC_RELAXED);
}

void lg_tls_free(struct lg_tls *t)
{
    if (t == NULL)
        return;
    SSL_CTX_free(t->ctx);
    SSL_SESSION_free(t->session);
    pthread_mutex_destroy(&t->lock);
    free(t->name);
    free(t);
}

struct lg_tls_conn *lg_tls_start(struct lg_tls *t, int fd)
{
    SSL *ssl = SSL_new(t->ctx);
    if (ssl == NULL)
        return NULL;
    int ok = SSL_set_fd(ssl, fd) == 1;
    if (ok && t->name && !t->ip)
        ok = SSL_set_tlsext_host_name(ssl, t->name) == 1;
    if (ok && t->name && !t->insecure) {
        X509_VERIFY_PARAM *param = SSL_get0_param(ssl);
        ok = t->ip ? X509_VERIFY_PARAM_set1_ip_asc(param, t->name) == 1 : SSL_set1_host(ssl, t->name) == 1;
    }
    if (ok && t->resume) {
        pthread_mutex_lock(&t->lock);
        if (t->session)
            ok = SSL_set_session(ssl, t->session) == 1;
        pthread_mutex_unlock(&t->lock);
    }
    if (!ok) {
        SSL_free(ssl);
        return NULL;
    }
    SSL_set_connect_state(ssl);
    return (struct lg_tls_conn *)ssl;
}

void lg_tls_end(struct lg_tls_conn *c)
{
    SSL *ssl = (SSL *)c;
    struct lg_tls *t = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)); /* set when resuming */
    SSL_SESSION *s = t ? SSL_get1_session(ssl) : NULL;
    if (s && SSL_SESSION_is_resumable(s)) { /* what the server gave (a TLS 1.3 ticket) */
        pthread_mutex_lock(&t->lock);
        SSL_SESSION *old = t->session;
        t->session = s;
        pthread_mutex_unlock(&t->lock);
        s = old;
    }
    SSL_SESSION_free(s);
    /* No close_notify (the socket is closed next), but an end all the
     * same: a TLS connection freed unshut makes its session unresumable. */
    SSL_set_shutdown(ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    SSL_free(ssl);
}

/* -1 with errno for a step that did not move bytes: EAGAIN when it waits. */
static int failed(SSL *ssl, int r)
{
    switch (SSL_get_error(ssl, r)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_ZERO_RETURN:
        return 0;
    case SSL_ERROR_SYSCALL:
        if (ERR_peek_error() == 0 && errno == 0)
            return 0; /* closed without close_notify: an end all the same */
        if (errno == 0 || errno == EAGAIN)
            errno = ECONNRESET;
        return -1;
    default:
        errno = EPROTO;
        return -1;
    }
}

int lg_tls_handshake(struct lg_tls_conn *c, int *want_write)
{
    SSL *ssl = (SSL *)c;
    ERR_clear_error();
    int r = SSL_do_handshake(ssl);
    if (r == 1) {
        struct lg_tls *t = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)); /* set when resuming */
        if (t) {
            __atomic_add_fetch(&t->done, 1, __ATOMIC_RELAXED);
            if (SSL_session_reused(ssl))
                __atomic_add_fetch(&t->resumed, 1, __ATOMIC_RELAXED);
        }
        return 1;
    }
    int e = SSL_get_error(ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        *want_write = e == SSL_ERROR_WANT_WRITE;
        return 0;
    }
    return -1;
}

ssize_t lg_tls_send(struct lg_tls_conn *c, const void *p, size_t n)
{
    SSL *ssl = (SSL *)c;
    ERR_clear_error();
    errno = 0;
    int r = SSL_write(ssl, p, n > INT32_MAX ? INT32_MAX : (int)n);
    if (r > 0)
        return r;
    if (failed(ssl, r) == 0)
        errno = EPIPE; /* the peer ended the stream: nothing more can go */
    return -1;
}

ssize_t lg_tls_recv(struct lg_tls_conn *c, void *p, size_t n)
{
    SSL *ssl = (SSL *)c;
    ERR_clear_error();
    errno = 0;
    int r = SSL_read(ssl, p, n > INT32_MAX ? INT32_MAX : (int)n);
    return r > 0 ? r : failed(ssl, r);
}

int lg_tls_pending(const struct lg_tls_conn *c)
{
    return SSL_has_pending((const SSL *)c);
}

void lg_tls_error(const struct lg_tls_conn *c, char *buf, size_t n)
{
    const SSL *ssl = (const SSL *)c;
    long v = SSL_get_verify_result(ssl);
    unsigned long e = ERR_peek_last_error();
    if (v != X509_V_OK)
        snprintf(buf, n, "certificate verify failed: %s", X509_verify_cert_error_string(v));
    else if (e)
        snprintf(buf, n, "%s", ERR_reason_error_string(e) ? ERR_reason_error_string(e) : "handshake failed");
    else
        snprintf(buf, n, "handshake failed: %s", errno ? strerror(errno) : "connection closed");
}

#else /* no OpenSSL at build time */

int lg_tls_available(void)
{
    return 0;
}

struct lg_tls *lg_tls_new(const char *server_name, int insecure, int resume, char *err, size_t errlen)
{
    (void)server_name;
    (void)insecure;
    (void)resume;
    snprintf(err, errlen, "TLS unavailable: oribi bench was built without OpenSSL (install libssl-dev and rebuild)");
    return NULL;
}

void lg_tls_free(struct lg_tls *t)
{
    (void)t;
}

void lg_tls_resumed(struct lg_tls *t, uint64_t *resumed, uint64_t *done)
{
    (void)t;
    *resumed = *done = 0;
}

struct lg_tls_conn *lg_tls_start(struct lg_tls *t, int fd)
{
    (void)t;
    (void)fd;
    return NULL;
}

void lg_tls_end(struct lg_tls_conn *c)
{
    (void)c;
}

int lg_tls_handshake(struct lg_tls_conn *c, int *want_write)
{
    (void)c;
    (void)want_write;
    return -1;
}

ssize_t lg_tls_send(struct lg_tls_conn *c, const void *p, size_t n)
{
    (void)c;
    (void)p;
    (void)n;
    errno = EPROTO;
    return -1;
}

ssize_t lg_tls_recv(struct lg_tls_conn *c, void *p, size_t n)
{
    (void)c;
    (void)p;
    (void)n;
    errno = EPROTO;
    return -1;
}

int lg_tls_pending(const struct lg_tls_conn *c)
{
    (void)c;
    return 0;
}

void lg_tls_error(const struct lg_tls_conn *c, char *buf, size_t n)
{
    (void)c;
    snprintf(buf, n, "TLS unavailable");
}

#endif
