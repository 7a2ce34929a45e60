#include "parser.h"
int oribi_parse_request(const char *buf, size_t len, size_t last_len,
                        struct oribi_request *req, const struct oribi_limits *limits)
{ (void)buf; (void)len; (void)last_len; (void)limits; req->status = 400; return ORIBI_PARSE_ERROR; }
int oribi_parser_simd(void) { return 0; }
