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
    set_source_files_properties(${ARGN} TARGET_DIRECTORY ${target}
                                PROPERTIES LANGUAGE CXX COMPILE_OPTIONS "-x;c++")
  endif()
endfunction()
