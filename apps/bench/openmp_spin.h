// Bounds how long the peers' idle OpenMP threads spin, for the benchmarks' side-by-side timing.
//
// Note [OpenMP spinning in the benchmarks]: oneDNN (in this process) and PyTorch (in the peer
// script) run on GNU OpenMP, whose idle worker threads busy-wait for the next parallel region
// before they sleep. Left at libgomp's default, those spinning threads kept both of this
// machine's cores busy while ember's rows that followed a oneDNN row were timed: `ember bench
// ops` at 2 threads read 107-147 GFLOP/s for ember's 512^3-2048^3 GEMM and 103-105 for its
// matmul (a row that only follows oneDNN's), against 178-183 with GOMP_SPINCOUNT=10000; oneDNN's
// own 2-thread rows read 168-193 and 205-216 (it also ran after ember's). 10000 spins (well under
// a millisecond) still cover the gap between one peer call and the next inside a timed block;
// OMP_WAIT_POLICY=passive did not (oneDNN's 64^3 fell from 114 to 7 GFLOP/s). libgomp reads
// its settings when it is loaded, before main, so the bench commands re-execute themselves with
// the variable set; the peer script's Python inherits it. A user's own OMP_WAIT_POLICY or
// GOMP_SPINCOUNT is left as it is.
#pragma once

namespace ember::bench {

// The value the benchmarks give GOMP_SPINCOUNT, and whether this process runs with a bound
// that they set or the user chose ("GOMP_SPINCOUNT=10000", "OMP_WAIT_POLICY=active", ...).
const char* openmp_spin_setting();

// For `ember bench ...`: when neither GOMP_SPINCOUNT nor OMP_WAIT_POLICY is set, sets
// GOMP_SPINCOUNT and re-executes this program with the same arguments (Note [OpenMP spinning
// in the benchmarks]); returns only when it did not (already set, run through a loader, or exec
// failed). The variable reaches whatever the benchmark starts (the peer script, mpirun's ranks).
void bound_openmp_spinning(char** argv);

}  // namespace ember::bench
