#include "oribi.h"
void Init_oribi_loadgen(VALUE m) { (void)m; }
