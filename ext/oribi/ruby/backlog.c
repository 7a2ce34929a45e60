/*
 * Oribi.listen_queue(fd): how many connections wait in a listening
 * socket's accept queue, and its limit, as the kernel says. Read by the
 * master for stats, never on the request path.
 *   TCP:  TCP_INFO; for a socket in LISTEN, tcpi_unacked is the current
 *         accept-queue length and tcpi_sacked its maximum (what ss shows).
 *   unix: a sock_diag (netlink) query for the socket's inode with
 *         UDIAG_SHOW_RQLEN; for a listener rqueue / wqueue are the same pair.
 *   FreeBSD: SO_LISTENQLEN and SO_LISTENQLIMIT, for both.
 * Each where extconf.rb found it; elsewhere (macOS) nil: stats leave the
 * backlog out.
 */
#include <errno.h>
#ifdef ORIBI_HAVE_SOCK_DIAG
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#endif
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <ruby.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ruby/oribi.h"

#ifndef TCP_LISTEN
#define TCP_LISTEN 10
#endif

#if defined(ORIBI_HAVE_TCP_INFO_QUEUE) || defined(ORIBI_HAVE_SOCK_DIAG) || defined(ORIBI_HAVE_SO_LISTENQLEN)
static VALUE pair(uint32_t queued, uint32_t max)
{
    return rb_ary_new_from_args(2, UINT2NUM(queued), UINT2NUM(max));
}
#endif

#if defined(ORIBI_HAVE_TCP_INFO_QUEUE)
static VALUE tcp_queue(int fd)
{
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    memset(&ti, 0, sizeof(ti));
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0 || ti.tcpi_state != TCP_LISTEN)
        return Qnil;
    return pair(ti.tcpi_unacked, ti.tcpi_sacked);
}
#endif

#if defined(ORIBI_HAVE_SOCK_DIAG)
static VALUE unix_queue(int fd)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return Qnil;
    int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (nl < 0)
        return Qnil;
    struct {
        struct nlmsghdr nlh;
        struct unix_diag_req req;
    } q;
    memset(&q, 0, sizeof(q));
    q.nlh.nlmsg_len = sizeof(q);
    q.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    q.nlh.nlmsg_flags = NLM_F_REQUEST;
    q.req.sdiag_family = AF_UNIX;
    q.req.udiag_states = 1u << TCP_LISTEN;
    q.req.udiag_ino = (uint32_t)st.st_ino;
    q.req.udiag_show = UDIAG_SHOW_RQLEN;
    q.req.udiag_cookie[0] = q.req.udiag_cookie[1] = ~0u; /* no cookie: look up by inode */
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    VALUE result = Qnil;
    union {
        char buf[8192];
        struct nlmsghdr align;
    } r;
    if (sendto(nl, &q, sizeof(q), 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
        goto done;
    ssize_t n = recv(nl, r.buf, sizeof(r.buf), 0);
    for (struct nlmsghdr *h = &r.align; n > 0 && NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
        if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY || h->nlmsg_len < NLMSG_LENGTH(sizeof(struct unix_diag_msg)))
            break;
        struct unix_diag_msg *m = NLMSG_DATA(h);
        if (m->udiag_ino != (uint32_t)st.st_ino)
            continue;
        int alen = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof(*m)));
        for (struct rtattr *a = (struct rtattr *)(m + 1); RTA_OK(a, alen); a = RTA_NEXT(a, alen)) {
            if (a->rta_type == UNIX_DIAG_RQLEN && RTA_PAYLOAD(a) >= (int)sizeof(struct unix_diag_rqlen)) {
                struct unix_diag_rqlen *rq = RTA_DATA(a);
                result = pair(rq->udiag_rqueue, rq->udiag_wqueue);
            }
        }
        break;
    }
done:
    close(nl);
    return result;
}
#endif

#if defined(ORIBI_HAVE_SO_LISTENQLEN)
static VALUE sockopt_queue(int fd)
{
    int queued, max;
    socklen_t len = sizeof(queued);
    if (getsockopt(fd, SOL_SOCKET, SO_LISTENQLEN, &queued, &len) < 0)
        return Qnil;
    len = sizeof(max);
    if (getsockopt(fd, SOL_SOCKET, SO_LISTENQLIMIT, &max, &len) < 0)
        return Qnil;
    return pair((uint32_t)queued, (uint32_t)max);
}
#endif

/* Oribi.listen_queue(fd) → [queued, max], or nil when the kernel does not say */
static VALUE listen_queue(VALUE mod, VALUE vfd)
{
    int fd = NUM2INT(vfd);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
        return Qnil;
#if defined(ORIBI_HAVE_TCP_INFO_QUEUE)
    if (ss.ss_family == AF_INET || ss.ss_family == AF_INET6)
        return tcp_queue(fd);
#endif
#if defined(ORIBI_HAVE_SOCK_DIAG)
    if (ss.ss_family == AF_UNIX)
        return unix_queue(fd);
#endif
#if defined(ORIBI_HAVE_SO_LISTENQLEN)
    if (ss.ss_family == AF_INET || ss.ss_family == AF_INET6 || ss.ss_family == AF_UNIX)
        return sockopt_queue(fd);
#endif
    return Qnil;
}

void Init_oribi_backlog(VALUE mOribi)
{
    rb_define_module_function(mOribi, "listen_queue", listen_queue, 1);
}
