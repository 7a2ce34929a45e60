/*
 * A file's bytes to a socket without passing through user space where the
 * kernel can: Linux's sendfile(2), or the BSDs' and macOS's (other
 * arguments, the same idea); else pread and send through a buffer.
 */
#ifndef ORIBI_SENDFILE_H
#define ORIBI_SENDFILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Up to count bytes of in from *off to the non-blocking socket out,
 * advancing *off by what was sent. Returns that (0: the file ended), or -1
 * with errno (EAGAIN: the socket is full and nothing was sent). */
ssize_t oribi_sendfile(int out, int in, int64_t *off, size_t count);

#endif
