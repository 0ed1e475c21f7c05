// DSV41_API marks the symbols the shared library exports (everything else is hidden).
#pragma once

#if defined(DSV41_BUILDING_LIBRARY)
#define DSV41_API __attribute__((visibility("default")))
#else
#define DSV41_API
#endif

// DSV41_INTERNAL marks the private Impl types of the public classes: hidden from the shared
// library even though dsv41.map exports every member of those classes ("dsv41::Engine::*"
// would otherwise match dsv41::Engine::Impl::run too).
#if defined(__GNUC__)
#define DSV41_INTERNAL __attribute__((visibility("hidden")))
#else
#define DSV41_INTERNAL
#endif
