#include "oribi.h"
void Init_oribi_engine(VALUE m) { (void)m; }
