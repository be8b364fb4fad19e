// The one source of embody_pch (CMakeLists.txt, EMBODY_PCH_HEADERS): the target exists to build
// the precompiled header every production library and program reuses; this file holds nothing
// of its own.
