/* Oribi::Stream: what a streaming body (body.call) writes to and reads from. */
#ifndef ORIBI_STREAM_H
#define ORIBI_STREAM_H

#include "ruby/exchange.h"

VALUE oribi_stream_new(VALUE exchange);
void oribi_stream_finish(VALUE stream); /* the response is over: the stream is closed */
void Init_oribi_stream(VALUE mOribi);

#endif
