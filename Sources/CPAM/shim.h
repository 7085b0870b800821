#ifndef LA_CPAM_SHIM_H
#define LA_CPAM_SHIM_H

#include <security/pam_appl.h>

#endif
