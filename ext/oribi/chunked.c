#include "chunked.h"
ssize_t oribi_decode_chunked(struct oribi_chunked_decoder *d, char *buf, size_t *bufsz)
{ (void)d; (void)buf; (void)bufsz; return ORIBI_CHUNKED_ERROR; }
