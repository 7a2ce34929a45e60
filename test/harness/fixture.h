/*
 * What the C harnesses (test/harness/, test/tsan/threads.c) share: a
 * loopback listener and the loop options they run with (the server's
 * defaults, timeouts of 5 s).
 */
#ifndef ORIBI_TEST_FIXTURE_H
#define ORIBI_TEST_FIXTURE_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "loop/loop.h"

/* A listening TCP socket on 127.0.0.1 and a free port (into *port);
 * exits 2 if there is none. */
static inline int fixture_listen(int *port)
{
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof(sa);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 128) < 0 ||
        getsockname(lfd, (struct sockaddr *)&sa, &sl) < 0) {
        perror("listen");
        exit(2);
    }
    *port = ntohs(sa.sin_port);
    return lfd;
}

static inline struct oribi_options fixture_options(void)
{
    return (struct oribi_options){
        .limits = {ORIBI_DEFAULT_MAX_REQUEST_LINE, ORIBI_DEFAULT_MAX_HEADER_BYTES, ORIBI_DEFAULT_MAX_HEADERS},
        .keepalive = 1,
        .keepalive_timeout_ms = 5000,
        .header_timeout_ms = 5000,
        .body_timeout_ms = 5000,
        .write_timeout_ms = 5000,
        .body_buffer = 65536,
        .max_connections = 1024,
        .tmpdir = "/tmp",
    };
}

#endif
