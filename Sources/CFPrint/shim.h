#ifndef LA_CFPRINT_SHIM_H
#define LA_CFPRINT_SHIM_H

#include <fprint.h>

#endif
