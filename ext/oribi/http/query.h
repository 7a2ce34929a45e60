/*
 * The byte-level half of application/x-www-form-urlencoded parsing, as
 * Rack::QueryParser does it (lib/oribi/query_parser.rb builds the params):
 * pairs are split at a separator byte and the spaces after it, each pair
 * at its first '=', and each half decoded ('+' is a space, %XX a byte).
 * No allocation; every length comes from the caller.
 */
#ifndef ORIBI_QUERY_H
#define ORIBI_QUERY_H

#include <stddef.h>

/* The separator sets Rack names (Rack::QueryParser::COMMON_SEP). */
enum oribi_query_sep {
    ORIBI_QUERY_SEP_AMP = 0,        /* "&" (and the default) */
    ORIBI_QUERY_SEP_SEMI = 1,       /* ";" */
    ORIBI_QUERY_SEP_SEMI_COMMA = 2, /* ";," */
};

#define ORIBI_QUERY_BAD_ESCAPE ((size_t)-1)

/* Separator bytes in s[0..len): one less than the pieces Rack's split makes. */
size_t oribi_query_count_seps(const char *s, size_t len, int sep);

/*
 * The piece of s[0..len) starting at *pos: its length is returned, *pos
 * moves past it, its separator and the spaces after that. *more is cleared
 * when this was the last piece (the one with no separator after it).
 */
size_t oribi_query_next_piece(const char *s, size_t len, size_t *pos, int sep, int *more);

/*
 * Decodes s[0..len) into out (room for len bytes); returns the decoded
 * length, or ORIBI_QUERY_BAD_ESCAPE when a '%' is not followed by two hex
 * digits (then out holds garbage).
 */
size_t oribi_query_decode(const char *s, size_t len, char *out);

#endif
