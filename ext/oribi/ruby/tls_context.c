/*
 * Oribi::TLSContext: a TLS listener's settings as OpenSSL holds them (an
 * SSL_CTX): its certificate chain and private key, the client certificates
 * it asks for and trusts, protocol versions and ciphers, ALPN http/1.1,
 * session tickets. Made by the master before it forks, so that the workers'
 * copies share one set of ticket keys: a client resumes its session on any
 * worker. Every check a bad file fails is made here, at boot and by
 * --check-config, with a line that names the file and never its contents.
 *
 *   Oribi::TLSContext.new(settings)  settings: a Hash with String keys
 *     "cert" PATH | "cert_pem" PEM    the certificate, then its chain
 *     "key" PATH  | "key_pem" PEM     its private key
 *     "ca" PATH                       client certificates are checked against these
 *     "verify_mode"                   "none" (default), "peer" (asked for,
 *                                     checked when given), "force_peer" (required)
 *     "ssl_cipher_filter"             TLS 1.2 ciphers (OpenSSL's cipher list)
 *     "ssl_ciphersuites"              TLS 1.3 suites
 *     "reuse"                         "false": no session resumption (tickets
 *                                     and the session cache are on by default)
 *   #subject, #not_after (a Time): the certificate's, for the boot line
 *   #add_sni(other): other's certificate for clients that name it (SNI)
 *   Oribi::TLSContext::LIBRARY: OpenSSL's version, or nil when built without
 *   Oribi::TLSContext::LIBRARY_KTLS: whether that OpenSSL can use kernel TLS
 */
#include <ruby.h>
#include <string.h>

#include "ruby/oribi.h"
#include "ruby/tls_context.h"

static VALUE cTLSContext, eTLSError;

#ifdef ORIBI_HAVE_OPENSSL
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

/* The context, and those of the other certificates it serves by SNI
 * (#add_sni: each an Oribi::TLSContext of its own, which the Ruby object
 * keeps alive). */
struct tls_ctx {
    SSL_CTX *ctx;
    int nsni;
    SSL_CTX **sni;
};

static void ctx_free(void *p)
{
    struct tls_ctx *t = p;
    SSL_CTX_free(t->ctx);
    for (int i = 0; i < t->nsni; i++)
        SSL_CTX_free(t->sni[i]);
    xfree(t->sni);
    xfree(t);
}

static const rb_data_type_t ctx_type = {
    "Oribi::TLSContext", {NULL, ctx_free, NULL}, NULL, NULL, RUBY_TYPED_FREE_IMMEDIATELY,
};

static VALUE ctx_alloc(VALUE klass)
{
    struct tls_ctx *t;
    return TypedData_Make_Struct(klass, struct tls_ctx, &ctx_type, t);
}

/* Raises the error: what failed, then OpenSSL's reason for it. */
static void fail(const char *what, VALUE name)
{
    char reason[256] = "";
    unsigned long e = ERR_peek_last_error();
    if (e)
        ERR_error_string_n(e, reason, sizeof(reason));
    ERR_clear_error();
    const char *r = strrchr(reason, ':'); /* "error:0A0000..:SSL routines::reason" */
    r = r && r[1] ? r + 1 : reason;
    if (NIL_P(name))
        rb_raise(eTLSError, "%s%s%s", what, *r ? ": " : "", r);
    rb_raise(eTLSError, "%s %" PRIsVALUE "%s%s", what, name, *r ? ": " : "", r);
}

static VALUE setting(VALUE settings, const char *key)
{
    VALUE v = rb_hash_lookup2(settings, rb_str_new_cstr(key), Qnil);
    return NIL_P(v) ? v : StringValue(v);
}

/* The leaf and its chain from PEM text. */
static void use_cert_pem(SSL_CTX *ctx, VALUE pem)
{
    BIO *bio = BIO_new_mem_buf(RSTRING_PTR(pem), (int)RSTRING_LEN(pem));
    X509 *leaf = bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
    int ok = leaf && SSL_CTX_use_certificate(ctx, leaf) == 1;
    X509_free(leaf);
    X509 *next;
    while (ok && (next = PEM_read_bio_X509(bio, NULL, NULL, NULL)))
        ok = SSL_CTX_add0_chain_cert(ctx, next) == 1 || (X509_free(next), 0);
    ERR_clear_error(); /* the end of the text */
    BIO_free(bio);
    if (!ok)
        fail("cannot read the certificate in cert_pem", Qnil);
}

/* The private key from its file or PEM text, checked against the
 * certificate before it is used: a mismatch is said as one. */
static void use_key(SSL_CTX *ctx, VALUE path, VALUE pem, VALUE cert)
{
    BIO *bio = NIL_P(pem) ? BIO_new_file(StringValueCStr(path), "r")
                          : BIO_new_mem_buf(RSTRING_PTR(pem), (int)RSTRING_LEN(pem));
    EVP_PKEY *key = bio ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL) : NULL;
    BIO_free(bio);
    if (!key)
        fail(NIL_P(pem) ? "cannot read the private key in" : "cannot read the private key in key_pem", path);
    if (X509_check_private_key(SSL_CTX_get0_certificate(ctx), key) != 1) {
        EVP_PKEY_free(key);
        ERR_clear_error();
        rb_raise(eTLSError, "the private key %s does not match the certificate %s",
                 NIL_P(pem) ? StringValueCStr(path) : "in key_pem",
                 NIL_P(cert) ? "in cert_pem" : StringValueCStr(cert));
    }
    int ok = SSL_CTX_use_PrivateKey(ctx, key) == 1;
    EVP_PKEY_free(key);
    if (!ok)
        fail("cannot use the private key", NIL_P(pem) ? path : Qnil);
}

/* ALPN: http/1.1 when the client offers it; else no protocol is agreed
 * and the connection goes on as HTTP/1.1 (a client that offers only h2
 * fails then, as it should: this server speaks HTTP/1.1). */
static int select_alpn(SSL *s, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
                       unsigned int inlen, void *arg)
{
    (void)s;
    (void)arg;
    static const unsigned char h11[] = "\x08http/1.1";
    unsigned char *sel;
    if (SSL_select_next_proto(&sel, outlen, h11, sizeof(h11) - 1, in, inlen) != OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK;
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
}

static VALUE ctx_init(VALUE self, VALUE settings)
{
    Check_Type(settings, T_HASH);
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx)
        fail("cannot make a TLS context", Qnil);
    ((struct tls_ctx *)rb_check_typeddata(self, &ctx_type))->ctx = ctx;
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_COMPRESSION |
                                 SSL_OP_CIPHER_SERVER_PREFERENCE);
    /* A write the socket did not take is offered again from another
     * buffer (the conn's); an idle connection keeps no record buffers. */
    SSL_CTX_set_mode(ctx,
                     SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
    /* A record's header and body in one read(2), and the records behind
     * it with them: not two reads a record. */
    SSL_CTX_set_read_ahead(ctx, 1);
    SSL_CTX_set_session_id_context(ctx, (const unsigned char *)"oribi", 5);
    SSL_CTX_set_alpn_select_cb(ctx, select_alpn, NULL);

    VALUE cert = setting(settings, "cert"), cert_pem = setting(settings, "cert_pem");
    VALUE key = setting(settings, "key"), key_pem = setting(settings, "key_pem");
    if (NIL_P(cert) == NIL_P(cert_pem))
        rb_raise(eTLSError, "a TLS listener needs its certificate: cert (a file) or cert_pem, one of them");
    if (NIL_P(key) == NIL_P(key_pem))
        rb_raise(eTLSError, "a TLS listener needs its private key: key (a file) or key_pem, one of them");
    if (!NIL_P(cert) && SSL_CTX_use_certificate_chain_file(ctx, StringValueCStr(cert)) != 1)
        fail("cannot read the certificate in", cert);
    if (!NIL_P(cert_pem))
        use_cert_pem(ctx, cert_pem);
    use_key(ctx, key, key_pem, cert);
    X509 *leaf = SSL_CTX_get0_certificate(ctx);
    if (X509_cmp_current_time(X509_get0_notAfter(leaf)) < 0)
        rb_raise(eTLSError, "the certificate %s has expired (not after %" PRIsVALUE ")",
                 NIL_P(cert) ? "in cert_pem" : StringValueCStr(cert), rb_funcall(self, rb_intern("not_after"), 0));

    VALUE ca = setting(settings, "ca");
    if (!NIL_P(ca)) {
        if (SSL_CTX_load_verify_locations(ctx, StringValueCStr(ca), NULL) != 1)
            fail("cannot read the CA certificates in", ca);
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(StringValueCStr(ca));
        if (names)
            SSL_CTX_set_client_CA_list(ctx, names); /* what the server asks the client for */
        ERR_clear_error();
    }
    VALUE mode = setting(settings, "verify_mode");
    int verify = SSL_VERIFY_NONE;
    if (NIL_P(mode) || strcmp(StringValueCStr(mode), "none") == 0)
        verify = SSL_VERIFY_NONE;
    else if (strcmp(StringValueCStr(mode), "peer") == 0)
        verify = SSL_VERIFY_PEER;
    else if (strcmp(StringValueCStr(mode), "force_peer") == 0)
        verify = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    else
        rb_raise(eTLSError, "verify_mode %" PRIsVALUE ": none, peer or force_peer", mode);
    if (verify != SSL_VERIFY_NONE && NIL_P(ca))
        rb_raise(eTLSError,
                 "verify_mode %" PRIsVALUE " needs ca: the certificates client certificates are checked against", mode);
    SSL_CTX_set_verify(ctx, verify, NULL);

    VALUE reuse = setting(settings, "reuse");
    if (!NIL_P(reuse) && strcmp(StringValueCStr(reuse), "false") == 0) {
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
        SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
        SSL_CTX_set_num_tickets(ctx, 0);
    }
    VALUE ciphers = setting(settings, "ssl_cipher_filter");
    if (!NIL_P(ciphers) && SSL_CTX_set_cipher_list(ctx, StringValueCStr(ciphers)) != 1)
        fail("ssl_cipher_filter names no cipher OpenSSL has:", ciphers);
    VALUE suites = setting(settings, "ssl_ciphersuites");
    if (!NIL_P(suites) && SSL_CTX_set_ciphersuites(ctx, StringValueCStr(suites)) != 1)
        fail("ssl_ciphersuites names no TLS 1.3 suite OpenSSL has:", suites);
    ERR_clear_error();
    return self;
}

static SSL_CTX *ctx_get(VALUE self)
{
    struct tls_ctx *t = rb_check_typeddata(self, &ctx_type);
    if (!t->ctx)
        rb_raise(rb_eArgError, "an uninitialized Oribi::TLSContext");
    return t->ctx;
}

/* SNI: the first certificate whose names match the client's server name;
 * the context's own when none does, or the client names none. */
static int pick_certificate(SSL *s, int *alert, void *arg)
{
    (void)alert;
    struct tls_ctx *t = arg;
    const char *name = SSL_get_servername(s, TLSEXT_NAMETYPE_host_name);
    if (!name)
        return SSL_TLSEXT_ERR_OK;
    for (int i = 0; i < t->nsni; i++) {
        if (X509_check_host(SSL_CTX_get0_certificate(t->sni[i]), name, 0, 0, NULL) == 1) {
            SSL_set_SSL_CTX(s, t->sni[i]); /* its certificate; tickets stay the listener's */
            break;
        }
    }
    return SSL_TLSEXT_ERR_OK;
}

/* add_sni(other): other's certificate is presented to clients that name
 * one of its names (SNI); the rest of the settings are other's too. */
static VALUE ctx_add_sni(VALUE self, VALUE other)
{
    struct tls_ctx *t = rb_check_typeddata(self, &ctx_type);
    SSL_CTX *o = ctx_get(other);
    ctx_get(self);
    SSL_CTX_up_ref(o);
    REALLOC_N(t->sni, SSL_CTX *, t->nsni + 1);
    t->sni[t->nsni++] = o;
    SSL_CTX_set_tlsext_servername_callback(t->ctx, pick_certificate);
    SSL_CTX_set_tlsext_servername_arg(t->ctx, t);
    return self;
}

/* The certificate's subject, one line ("CN=example.com,O=..."). */
static VALUE ctx_subject(VALUE self)
{
    X509 *leaf = SSL_CTX_get0_certificate(ctx_get(self));
    BIO *bio = BIO_new(BIO_s_mem());
    X509_NAME_print_ex(bio, X509_get_subject_name(leaf), 0, XN_FLAG_RFC2253);
    char *p;
    long n = BIO_get_mem_data(bio, &p);
    VALUE s = rb_str_new(p, n);
    BIO_free(bio);
    return s;
}

static VALUE ctx_not_after(VALUE self)
{
    X509 *leaf = SSL_CTX_get0_certificate(ctx_get(self));
    struct tm tm;
    if (ASN1_TIME_to_tm(X509_get0_notAfter(leaf), &tm) != 1)
        return Qnil;
    return rb_funcall(rb_cTime, rb_intern("utc"), 6, INT2NUM(tm.tm_year + 1900), INT2NUM(tm.tm_mon + 1),
                      INT2NUM(tm.tm_mday), INT2NUM(tm.tm_hour), INT2NUM(tm.tm_min), INT2NUM(tm.tm_sec));
}

struct ssl_ctx_st *oribi_tls_context(VALUE ctx)
{
    if (!rb_typeddata_is_kind_of(ctx, &ctx_type))
        rb_raise(rb_eTypeError, "not an Oribi::TLSContext");
    return ctx_get(ctx);
}

void Init_oribi_tls_context(VALUE mOribi)
{
    cTLSContext = rb_define_class_under(mOribi, "TLSContext", rb_cObject);
    eTLSError = rb_define_class_under(cTLSContext, "Error", rb_eStandardError);
    rb_define_alloc_func(cTLSContext, ctx_alloc);
    rb_define_method(cTLSContext, "initialize", ctx_init, 1);
    rb_define_method(cTLSContext, "subject", ctx_subject, 0);
    rb_define_method(cTLSContext, "not_after", ctx_not_after, 0);
    rb_define_method(cTLSContext, "add_sni", ctx_add_sni, 1);
    rb_define_const(cTLSContext, "LIBRARY", rb_obj_freeze(rb_str_new_cstr(OpenSSL_version(OPENSSL_VERSION))));
#ifdef OPENSSL_NO_KTLS
    rb_define_const(cTLSContext, "LIBRARY_KTLS", Qfalse);
#else
    rb_define_const(cTLSContext, "LIBRARY_KTLS", Qtrue); /* OpenSSL was built able to hand records to the kernel */
#endif
}

#else /* built without OpenSSL: TLSContext.new says so */

static VALUE ctx_init(VALUE self, VALUE settings)
{
    (void)self;
    (void)settings;
    rb_raise(eTLSError, "this build of Oribi has no TLS (a platform gem, which links no OpenSSL so that it loads "
                        "anywhere, or a build without OpenSSL's headers): install the source gem where libssl-dev "
                        "(Debian's name) is installed");
}

struct ssl_ctx_st *oribi_tls_context(VALUE ctx)
{
    (void)ctx;
    rb_raise(rb_eTypeError, "not an Oribi::TLSContext");
}

void Init_oribi_tls_context(VALUE mOribi)
{
    cTLSContext = rb_define_class_under(mOribi, "TLSContext", rb_cObject);
    eTLSError = rb_define_class_under(cTLSContext, "Error", rb_eStandardError);
    rb_define_method(cTLSContext, "initialize", ctx_init, 1);
    rb_define_const(cTLSContext, "LIBRARY", Qnil);
    rb_define_const(cTLSContext, "LIBRARY_KTLS", Qfalse);
}

#endif
