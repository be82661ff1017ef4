# Resolves EMBER_CUDA into EMBER_CUDA_MODE (REAL, SIM or NONE).
# The CUDA backend arrives with the CUDA issue; until then every mode builds the CPU backend
# only, and a `cuda` device reports itself unavailable with a clear message.
string(TOUPPER "${EMBER_CUDA}" EMBER_CUDA)
if(NOT EMBER_CUDA MATCHES "^(AUTO|ON|SIM|OFF)$")
  message(FATAL_ERROR "EMBER_CUDA must be AUTO, ON, SIM or OFF, got '${EMBER_CUDA}'")
endif()
set(EMBER_CUDA_MODE NONE)
message(STATUS "ember: EMBER_CUDA=${EMBER_CUDA} -> CUDA backend: ${EMBER_CUDA_MODE}")
