/*
 * tchar (RFC 9110 5.6.2): the bytes of methods, field names, transfer
 * codings and chunk-extension names. One table for the parser, the chunked
 * decoder, the response writer and the load generator's response parser.
 */
#ifndef ORIBI_TOKEN_H
#define ORIBI_TOKEN_H

static const unsigned char oribi_tchar[256] = {
    ['!'] = 1, ['#'] = 1, ['$'] = 1, ['%'] = 1,         ['&'] = 1,         ['\''] = 1,
    ['*'] = 1, ['+'] = 1, ['-'] = 1, ['.'] = 1,         ['0' ... '9'] = 1, ['A' ... 'Z'] = 1,
    ['^'] = 1, ['_'] = 1, ['`'] = 1, ['a' ... 'z'] = 1, ['|'] = 1,         ['~'] = 1,
};

#endif
