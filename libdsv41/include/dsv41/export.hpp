// DSV41_API marks the symbols the shared library exports (everything else is hidden).
#pragma once

#if defined(DSV41_BUILDING_LIBRARY)
#define DSV41_API __attribute__((visibility("default")))
#else
#define DSV41_API
#endif
