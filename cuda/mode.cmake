# Resolves EMBER_CUDA (AUTO, ON, SIM, OFF) into EMBER_CUDA_MODE (REAL, SIM or NONE).
#
#   AUTO: REAL when nvcc is found, else NONE. A REAL build runs fine without a GPU: a process
#         that sees no GPU reports `cuda` unavailable and everything runs on the CPU.
#   ON:   REAL; an error when nvcc is missing.
#   SIM:  the kernels (*.cu) are compiled by the host compiler against the SIMT simulator
#         (cuda/sim/) and run on CPU threads; the `cuda` device is always available.
#   OFF:  no CUDA backend; `cuda` reports itself unavailable.
#
# Included by the top-level CMakeLists.txt before any target exists; cuda/CMakeLists.txt builds
# the runtime layer and ops/CMakeLists.txt the kernels (ops/cuda/*.cu).
string(TOUPPER "${EMBER_CUDA}" EMBER_CUDA)
if(NOT EMBER_CUDA MATCHES "^(AUTO|ON|SIM|OFF)$")
  message(FATAL_ERROR "EMBER_CUDA must be AUTO, ON, SIM or OFF, got '${EMBER_CUDA}'")
endif()

set(EMBER_CUDA_MODE NONE)
# Note [sanitizers]: sanitizer builds exist to check kernels on the simulator (and nvcc does
# not take -fsanitize), so AUTO picks SIM there and ON is refused.
set(_ember_cuda_request ${EMBER_CUDA})
if(EMBER_SANITIZE AND EMBER_CUDA STREQUAL "AUTO")
  set(_ember_cuda_request SIM)
elseif(EMBER_SANITIZE AND EMBER_CUDA STREQUAL "ON")
  message(FATAL_ERROR "EMBER_SANITIZE=${EMBER_SANITIZE} needs EMBER_CUDA=SIM, AUTO or OFF, got ON")
endif()
if(_ember_cuda_request STREQUAL "SIM")
  set(EMBER_CUDA_MODE SIM)
elseif(_ember_cuda_request MATCHES "^(AUTO|ON)$")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(EMBER_CUDA_MODE REAL)
  elseif(EMBER_CUDA STREQUAL "ON")
    message(FATAL_ERROR "EMBER_CUDA=ON but no CUDA compiler (nvcc) was found; set CUDACXX or "
                        "CMAKE_CUDA_COMPILER, or use EMBER_CUDA=SIM to run the kernels on the CPU")
  endif()
endif()

if(EMBER_CUDA_MODE STREQUAL "REAL")
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES "80;90" CACHE STRING "GPU architectures the kernels are compiled for")
  endif()
  enable_language(CUDA)
  # Note [nvcc C++20]: CMake 3.25 does not know nvcc's C++20 flag, and CUDA targets inherit
  # CXX_STANDARD 20 ("requires the language dialect CUDA20"); teach it the flag.
  if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION OR CMAKE_CUDA20_STANDARD_COMPILE_OPTION STREQUAL "")
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  find_package(CUDAToolkit REQUIRED)
endif()

# Note [Profile flags]: how a kernel file is compiled for the profiler, by `ember-simcc --profile`
# (cuda/simcc/ember-simcc.in receives this list) and by EMBER_SIM_PROFILE alike: debug lines and
# sanitizer coverage of basic blocks, loads and stores; no loop vectorisation (a CUDA thread's
# loop stays a loop of scalar accesses, as on a GPU) and vectors of at most 16 bytes (coverage
# traces no wider load or store, and a float4 stays one 16-byte access); no memcpy/memset idioms
# (clang would turn a thread's copy loop into a library call, whose accesses are not traced).
set(EMBER_SIM_PROFILE_FLAGS -g -fno-vectorize -mprefer-vector-width=128 -fno-builtin-memcpy -fno-builtin-memset
    -fno-builtin-memmove -fsanitize-coverage=bb,trace-pc-guard,trace-loads,trace-stores)

# Note [EMBER_SIM_PROFILE]: the kernel profiler of `ember-simcc --profile` (cuda/sim/profile.h)
# built into ember itself: the files ember_add_cuda_sources() adds (ops/cuda/*.cu) are compiled
# as ember-simcc --profile compiles a .cu file (debug lines, sanitizer coverage of basic blocks,
# loads and stores, cuda/sim/profile_shared.h first), an allowlist keeps the coverage to those
# files, and the ember library brings the coverage callbacks (cuda/sim/profile_coverage.cpp,
# pulled in by its anchor), so every ember program prints a table per kernel at exit.
if(EMBER_SIM_PROFILE)
  if(NOT EMBER_CUDA_MODE STREQUAL "SIM")
    message(FATAL_ERROR "EMBER_SIM_PROFILE=ON needs EMBER_CUDA=SIM (the profiler is the simulator's), got "
                        "EMBER_CUDA=${EMBER_CUDA} (CUDA backend: ${EMBER_CUDA_MODE})")
  endif()
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang" OR CMAKE_CXX_COMPILER_VERSION VERSION_LESS 16)
    message(FATAL_ERROR "EMBER_SIM_PROFILE=ON needs clang++ 16 or later as the C++ compiler (sanitizer "
                        "coverage of loads and stores), got ${CMAKE_CXX_COMPILER_ID} ${CMAKE_CXX_COMPILER_VERSION}; "
                        "configure a fresh build directory with CXX=clang++-16")
  endif()
  if(EMBER_SANITIZE)
    message(FATAL_ERROR "EMBER_SIM_PROFILE=ON records nothing under sanitizers (it needs fiber execution); "
                        "leave EMBER_SANITIZE empty")
  endif()
  set(_ember_cuda_note "${_ember_cuda_note} (kernel profiler)")
endif()
if(EMBER_SANITIZE)
  set(_ember_cuda_note " (sanitizer build)")
endif()
message(STATUS "ember: EMBER_CUDA=${EMBER_CUDA}${_ember_cuda_note} -> CUDA backend: ${EMBER_CUDA_MODE}")

# ---- shared settings of every target that compiles kernel sources ----------------------------
# ember_cuda_language: EMBER_CUDA_REAL / EMBER_CUDA_SIM, warnings and nvcc flags (each target
# brings its own include path: a layer's view, Note [Layers] in the top-level CMakeLists.txt).
# ember_add_cuda_sources(<target> <files.cu>...): adds kernel files to a target; in SIM mode
# they are compiled as C++ (`-x c++`) against the simulator.
if(NOT EMBER_CUDA_MODE STREQUAL "NONE")
  add_library(ember_cuda_language INTERFACE)
  target_compile_definitions(ember_cuda_language INTERFACE EMBER_CUDA_${EMBER_CUDA_MODE}=1)
  target_compile_options(ember_cuda_language INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>
    $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -lineinfo>)
  if(EMBER_NATIVE)
    target_compile_options(ember_cuda_language INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-march=native>)
  endif()
  if(EMBER_CUDA_MODE STREQUAL "REAL")
    target_link_libraries(ember_cuda_language INTERFACE CUDA::cudart)
  endif()
endif()

function(ember_add_cuda_sources target)
  target_sources(${target} PRIVATE ${ARGN})
  if(EMBER_CUDA_MODE STREQUAL "SIM")
    set(options -x c++)
    if(EMBER_SIM_PROFILE)
      # Note [EMBER_SIM_PROFILE]. The allowlist names the files by their path below the source
      # root with a leading `*`, so that it matches however the compiler is given the file
      # (ccache's base_dir makes absolute paths relative).
      set(allowlist ${PROJECT_BINARY_DIR}/ember_sim_profile/${target}.allowlist)
      set(entries "")
      foreach(file IN LISTS ARGN)
        get_filename_component(file ${file} ABSOLUTE)
        file(RELATIVE_PATH file ${PROJECT_SOURCE_DIR} ${file})
        string(APPEND entries "src:*${file}\n")
      endforeach()
      file(WRITE ${allowlist} "${entries}fun:*\n")  # both must match
      list(APPEND options -include cuda/sim/profile_shared.h ${EMBER_SIM_PROFILE_FLAGS}  # Note [Profile flags]
           -fsanitize-coverage-allowlist=${allowlist})
    endif()
    set_source_files_properties(${ARGN} TARGET_DIRECTORY ${target}
                                PROPERTIES LANGUAGE CXX COMPILE_OPTIONS "${options}")
  endif()
endfunction()
