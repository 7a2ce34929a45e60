#include "oribi.h"
void Init_oribi_parser(VALUE m) { (void)m; }
