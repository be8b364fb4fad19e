// The fixture of the HTTP suites that run on both stores: each is compiled twice (CMake's
// embody_server_suite), once with EMBODY_SERVER_ON_MEMORY, on the in-memory twin (label unit,
// runs without PostgreSQL), and once without, on PostgreSQL (label pg). A case that tests what
// only PostgreSQL does (its SQL, its notifications, its pool) sits in `#if
// !EMBODY_SERVER_ON_MEMORY` and reaches the cluster as `pg_`; suites that test nothing else
// (restarts, transactions) use InProcessServerTest (pg_server_fixture.h) directly.
#pragma once

#if EMBODY_SERVER_ON_MEMORY
#include "controlplane/testing/memory_server_fixture.h"
#else
#include "controlplane/testing/pg_server_fixture.h"
#endif

namespace controlplane {

#if EMBODY_SERVER_ON_MEMORY
using ServerTest = MemoryServerFixture;
#else
using ServerTest = InProcessServerTest;
#endif

}  // namespace controlplane
