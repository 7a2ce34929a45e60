/* A Rack response into bytes: head, array / each / to_path bodies, early hints. */
#ifndef ORIBI_RACK_RESPONSE_H
#define ORIBI_RACK_RESPONSE_H

#include "ruby/exchange.h"

VALUE oribi_rack_response_write(VALUE resp); /* (struct oribi_rack_response *) head and body; raises on app errors */
VALUE oribi_rack_response_close(VALUE resp); /* closes the body (and the file) */
VALUE oribi_early_hints(VALUE ticket, VALUE headers); /* env["rack.early_hints"].call */
void Init_oribi_rack_response(void);

/* A new worker's engine: each dropped header name is logged again, once. */
void oribi_rack_response_new_worker(void);

#endif
