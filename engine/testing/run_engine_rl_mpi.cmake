# Behaviour cloning then PPO, as the platform chains them: embody-engine trains BC_SPEC under
# mpirun (2 ranks) and writes checkpoints; a second run of kind "rl" (RL_SPEC, same model shape)
# starts its policy trunk from the last one (EMBODY_RESUME_FROM, as the agent sets it from a
# spec's init_from) and must finish its updates and leave its policy; then kind "eval" (one rank)
# evaluates both checkpoints on reach and push.
# cmake -DMPIEXEC=... -DENGINE=... -DBC_SPEC=... -DRL_SPEC=... -DEVAL_SPEC=... -DWORK_DIR=...
#       -P run_engine_rl_mpi.cmake
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(ENV{EMBODY_CHECKPOINT_DIR} "${WORK_DIR}/ckpt")
set(ENV{OMPI_ALLOW_RUN_AS_ROOT} 1)
set(ENV{OMPI_ALLOW_RUN_AS_ROOT_CONFIRM} 1)
unset(ENV{EMBODY_AGENT_URL})
unset(ENV{EMBODY_RESUME_FROM})
execute_process(
  COMMAND "${MPIEXEC}" -np 2 --oversubscribe "${ENGINE}" --spec "${BC_SPEC}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "behaviour cloning under mpirun failed (${rc}):\n${err}")
endif()
if(NOT EXISTS "${WORK_DIR}/ckpt/step-40.ckpt")
  message(FATAL_ERROR "behaviour cloning wrote no ${WORK_DIR}/ckpt/step-40.ckpt")
endif()

set(ENV{EMBODY_RESUME_FROM} "${WORK_DIR}/ckpt/step-40.ckpt")
execute_process(
  COMMAND "${MPIEXEC}" -np 2 --oversubscribe "${ENGINE}" --spec "${RL_SPEC}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "rl under mpirun failed (${rc}):\n${err}")
endif()
foreach(want "policy trunk loaded" "rl: 3 updates, 384 env steps")
  if(NOT "${out}${err}" MATCHES "${want}")
    message(FATAL_ERROR "output lacks '${want}':\n${out}\n${err}")
  endif()
endforeach()
if(NOT EXISTS "${WORK_DIR}/ckpt/step-3.ckpt")
  message(FATAL_ERROR "the rl job left no policy ${WORK_DIR}/ckpt/step-3.ckpt")
endif()

# The same job with level 1 across ranks: rank 0 learns, rank 1 acts (4 environments, so 64 steps
# an update), from the same behaviour-cloning trunk, which the rollout rank must get too.
file(READ "${RL_SPEC}" spec)
string(REPLACE "\"rl\": {" "\"rl\": {\"disaggregated\": {\"rollout_ranks\": 1}, \"env_async\": {}, "
       spec "${spec}")
file(WRITE "${WORK_DIR}/rollout_ranks.json" "${spec}")
file(MAKE_DIRECTORY "${WORK_DIR}/ranks")
set(ENV{EMBODY_CHECKPOINT_DIR} "${WORK_DIR}/ranks")
execute_process(
  COMMAND "${MPIEXEC}" -np 2 --oversubscribe "${ENGINE}" --spec "${WORK_DIR}/rollout_ranks.json"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "rl with rollout ranks failed (${rc}):\n${err}")
endif()
foreach(want "rollout_ranks 1" "policy trunk loaded" "rl: 6 updates, 384 env steps")
  if(NOT "${out}${err}" MATCHES "${want}")
    message(FATAL_ERROR "output lacks '${want}':\n${out}\n${err}")
  endif()
endforeach()
if(NOT EXISTS "${WORK_DIR}/ranks/step-6.ckpt")
  message(FATAL_ERROR "the rl job with rollout ranks left no policy ${WORK_DIR}/ranks/step-6.ckpt")
endif()
set(ENV{EMBODY_CHECKPOINT_DIR} "${WORK_DIR}/ckpt")

# The closed loop: kind "eval" on the BC checkpoint and on the rl policy (EVAL_SPEC, one rank).
foreach(pair "step-40.ckpt;bc" "step-3.ckpt;rl")
  list(GET pair 0 file)
  list(GET pair 1 policy)
  set(ENV{EMBODY_RESUME_FROM} "${WORK_DIR}/ckpt/${file}")
  execute_process(
    COMMAND "${MPIEXEC}" -np 1 --oversubscribe "${ENGINE}" --spec "${EVAL_SPEC}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  message("${out}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "eval of ${file} failed (${rc}):\n${err}")
  endif()
  foreach(want "eval: ${policy} policy" "reach +4 " "push +4 ")
    if(NOT "${out}" MATCHES "${want}")
      message(FATAL_ERROR "eval output lacks '${want}':\n${out}\n${err}")
    endif()
  endforeach()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
