#ifndef LA_CGIO_SHIM_H
#define LA_CGIO_SHIM_H

#include <gio/gio.h>

#endif
