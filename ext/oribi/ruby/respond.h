/* A Rack response into bytes: head, array / each / to_path bodies, early hints. */
#ifndef ORIBI_RESPOND_H
#define ORIBI_RESPOND_H

#include "ruby/slot.h"

VALUE oribi_respond_write(VALUE resp);  /* (struct oribi_resp *) head and body; raises on app errors */
VALUE oribi_respond_close(VALUE resp);  /* closes the body (and the file) */
VALUE oribi_early_hints(VALUE slot, VALUE headers);
void Init_oribi_respond(void);

#endif
