#include "loop/body.h"
#include "loop/log.h"
#include "loop/tmpfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int oribi_conn_reserve(struct oribi_conn *c, size_t n)
{
    if (c->cap - c->len >= n)
        return 0;
    size_t cap = c->cap ? c->cap : 4096;
    while (cap - c->len < n)
        cap *= 2;
    /* Not realloc: while both are there the parsed head's fields are moved
     * to the new buffer (parsed once, whatever the body does). */
    char *buf = malloc(cap);
    if (!buf)
        return -1;
    if (c->len)
        memcpy(buf, c->buf, c->len);
    if (c->head_len)
        oribi_request_rebase(&c->req, c->buf, c->head_len, buf);
    free(c->buf);
    c->buf = buf;
    c->cap = cap;
    return 0;
}

void oribi_conn_fit(struct oribi_conn *c)
{
    if (!c->len || c->cap - c->len < 1024)
        return;
    char *buf = malloc(c->len);
    if (!buf)
        return; /* it keeps the larger one */
    memcpy(buf, c->buf, c->len);
    if (c->head_len)
        oribi_request_rebase(&c->req, c->buf, c->head_len, buf);
    free(c->buf);
    c->buf = buf;
    c->cap = c->len;
}

/* The loop answers 500 itself: say why (errno is the cause). */
static int fail(struct oribi_conn *c, const char *what, const char *where)
{
    oribi_log("answered 500: a request body (%lld bytes so far) %s %s: %s", (long long)c->body_total, what, where,
              strerror(errno));
    return 500;
}

/* Moves what is in memory to a tmpfile: the body outgrew body_buffer. */
static int spill(struct oribi_loop *loop, struct oribi_conn *c)
{
    c->body_fd = oribi_tmpfile(loop->opt.tmpdir);
    if (c->body_fd < 0)
        return fail(c, "could not be spilled: no tmpfile in", loop->opt.tmpdir);
    if (oribi_write_all(c->body_fd, c->buf + c->head_len, c->body_mem) < 0)
        return fail(c, "could not be spilled to a tmpfile in", loop->opt.tmpdir);
    memmove(c->buf + c->head_len, c->buf + c->head_len + c->body_mem, c->len - c->head_len - c->body_mem);
    c->len -= c->body_mem;
    c->body_mem = 0;
    return 0;
}

int oribi_body_begin(struct oribi_loop *loop, struct oribi_conn *c)
{
    c->body_mem = 0;
    c->body_total = 0;
    c->body_mark = 0;
    c->body_fd = -1;
    memset(&c->dec, 0, sizeof(c->dec));
    if (c->req.chunked) {
        c->body_left = -1;
    } else if (c->req.content_length > 0) {
        if (loop->opt.max_body && c->req.content_length > loop->opt.max_body)
            return 413;
        c->body_left = c->req.content_length;
        if ((size_t)c->req.content_length > loop->opt.body_buffer) {
            if (spill(loop, c) != 0)
                return 500;
        } else if (oribi_conn_reserve(c, (size_t)c->req.content_length + 1024) < 0) {
            return fail(c, "could not be buffered:", "memory");
        }
    } else {
        c->rest_off = c->head_len;
        return REQ_BODY_DONE;
    }
    return oribi_body_feed(loop, c);
}

/* Stores n decoded bytes that sit at buf + off and drops them from the
 * input when they went to the file; tail bytes after them are kept. */
static int store(struct oribi_loop *loop, struct oribi_conn *c, size_t off, size_t n, size_t tail)
{
    c->body_total += (int64_t)n;
    if (loop->opt.max_body && c->body_total > loop->opt.max_body)
        return 413;
    if (c->body_fd < 0 && c->body_mem + n > loop->opt.body_buffer) {
        c->body_mem += n; /* spill() writes the memory part, this chunk included */
        if (spill(loop, c) != 0)
            return 500;
        return REQ_BODY_MORE;
    }
    if (c->body_fd >= 0) {
        if (oribi_write_all(c->body_fd, c->buf + off, n) < 0)
            return fail(c, "could not be written to its tmpfile in", loop->opt.tmpdir);
        memmove(c->buf + off, c->buf + off + n, tail);
        c->len = off + tail;
    } else {
        c->body_mem += n;
    }
    return REQ_BODY_MORE;
}

int oribi_body_feed(struct oribi_loop *loop, struct oribi_conn *c)
{
    size_t off = c->head_len + c->body_mem;
    size_t raw = c->len - off;
    int r;

    if (c->req.chunked) {
        size_t n = raw;
        ssize_t rest = oribi_decode_chunked(&c->dec, c->buf + off, &n);
        if (rest == ORIBI_CHUNKED_ERROR)
            return 400;
        size_t tail = rest >= 0 ? (size_t)rest : 0;
        c->len = off + n + tail; /* the decoder compacted the input */
        if ((r = store(loop, c, off, n, tail)) != REQ_BODY_MORE)
            return r;
        if (rest < 0)
            return REQ_BODY_MORE;
    } else {
        size_t take = raw < (uint64_t)c->body_left ? raw : (size_t)c->body_left;
        c->body_left -= (int64_t)take;
        if ((r = store(loop, c, off, take, raw - take)) != REQ_BODY_MORE)
            return r;
        if (c->body_left > 0)
            return REQ_BODY_MORE;
    }
    c->rest_off = c->head_len + c->body_mem;
    if (c->body_fd >= 0 && lseek(c->body_fd, 0, SEEK_SET) < 0)
        return fail(c, "could not be rewound in", loop->opt.tmpdir);
    return REQ_BODY_DONE;
}
