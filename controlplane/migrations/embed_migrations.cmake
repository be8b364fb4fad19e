# Generates a .cc that holds every migrations/NNNN_*.sql file as a raw string, in file-name order,
# so the server binary carries its own schema. Run by add_custom_command with -DOUT= -DSQL_FILES=.
set(body "// Generated from controlplane/migrations/*.sql by embed_migrations.cmake. Do not edit.\n")
string(APPEND body "#include \"controlplane/db/migrations.h\"\n\nnamespace controlplane::db {\n\n")
string(APPEND body "const std::vector<Migration>& EmbeddedMigrations() {\n")
string(APPEND body "  static const std::vector<Migration> kMigrations = {\n")
list(SORT SQL_FILES)
foreach(f IN LISTS SQL_FILES)
  get_filename_component(name "${f}" NAME_WE)
  string(REGEX MATCH "^[0-9]+" version "${name}")
  string(REGEX REPLACE "^0+([0-9])" "\\1" version "${version}")  # not an octal literal
  file(READ "${f}" sql)
  string(APPEND body "      {${version}, \"${name}\", R\"embodysql(${sql})embodysql\"},\n")
endforeach()
string(APPEND body "  };\n  return kMigrations;\n}\n\n}  // namespace controlplane::db\n")
file(WRITE "${OUT}.tmp" "${body}")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
