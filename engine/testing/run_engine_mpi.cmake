# Runs embody-engine under mpirun with 2 ranks on a small spec and checks what a launcher relies
# on: exit status 0, progress lines on stdout, and the checkpoints in EMBODY_CHECKPOINT_DIR.
# cmake -DMPIEXEC=... -DENGINE=... -DSPEC=... -DWORK_DIR=... -P run_engine_mpi.cmake
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(ENV{EMBODY_CHECKPOINT_DIR} "${WORK_DIR}/ckpt")
set(ENV{OMPI_ALLOW_RUN_AS_ROOT} 1)
set(ENV{OMPI_ALLOW_RUN_AS_ROOT_CONFIRM} 1)
unset(ENV{EMBODY_AGENT_URL})
execute_process(
  COMMAND "${MPIEXEC}" -np 2 --oversubscribe "${ENGINE}" --spec "${SPEC}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "embody-engine under mpirun failed (${rc}):\n${err}")
endif()
foreach(want "2 rank\\(s\\)" "rank 1 of 2 ready" "step 40/40 loss" "done: 40 steps"
             "eval: 64 held-out samples, 4 Euler steps: action MSE")
  if(NOT out MATCHES "${want}")
    message(FATAL_ERROR "stdout lacks '${want}'")
  endif()
endforeach()
foreach(step 20 40)
  if(NOT EXISTS "${WORK_DIR}/ckpt/step-${step}.ckpt")
    message(FATAL_ERROR "missing checkpoint ${WORK_DIR}/ckpt/step-${step}.ckpt")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
