// The one source of embody_test_pch_o1 and embody_test_pch_build (CMakeLists.txt,
// embody_use_test_pch): those targets exist to build the precompiled headers the test binaries
// reuse; this file holds nothing of its own.
