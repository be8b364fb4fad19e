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

# Runs embody-engine on `spec` under mpirun with `np` ranks; fails naming `what` unless it exits 0,
# prints every regex in ARGN (stdout and stderr) and leaves the file `leaves`.
function(run_engine what np spec leaves)
  execute_process(
    COMMAND "${MPIEXEC}" -np ${np} --oversubscribe "${ENGINE}" --spec "${spec}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  message("${out}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${err}")
  endif()
  foreach(want ${ARGN})
    if(NOT "${out}${err}" MATCHES "${want}")
      message(FATAL_ERROR "${what}: output lacks '${want}':\n${out}\n${err}")
    endif()
  endforeach()
  if(NOT EXISTS "${leaves}")
    message(FATAL_ERROR "${what} left no ${leaves}")
  endif()
endfunction()

run_engine("behaviour cloning under mpirun" 2 "${BC_SPEC}" "${WORK_DIR}/ckpt/step-40.ckpt")

set(ENV{EMBODY_RESUME_FROM} "${WORK_DIR}/ckpt/step-40.ckpt")
run_engine("rl under mpirun" 2 "${RL_SPEC}" "${WORK_DIR}/ckpt/step-3.ckpt"
           "policy trunk loaded" "rl: 3 updates, 384 env steps")

# The same job with level 1 across ranks: rank 0 learns, rank 1 acts (4 environments, so 64 steps
# an update), from the same behaviour-cloning trunk, which the rollout rank must get too.
file(READ "${RL_SPEC}" spec)
string(REPLACE "\"rl\": {" "\"rl\": {\"disaggregated\": {\"rollout_ranks\": 1}, \"env_async\": {}, "
       spec "${spec}")
file(WRITE "${WORK_DIR}/rollout_ranks.json" "${spec}")
file(MAKE_DIRECTORY "${WORK_DIR}/ranks")
set(ENV{EMBODY_CHECKPOINT_DIR} "${WORK_DIR}/ranks")
run_engine("rl with rollout ranks" 2 "${WORK_DIR}/rollout_ranks.json"
           "${WORK_DIR}/ranks/step-6.ckpt"
           "rollout_ranks 1" "policy trunk loaded" "rl: 6 updates, 384 env steps")
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
