# Writes the load test's 1 MiB ScatterElements case (the conformance case
# format, expected output included) to stdout:
#   awk -f make_scatter_case.awk > scatter_elements_1mib.json
# Input float32 [256, 1024] (1 MiB) holding i % 1000; along axis 1, 16 updates
# per row at columns (16 * j + 17 * r) % 1024, j < 16 (distinct within a row),
# of value -(16 * r + j + 1). Generated rather than kept: the case lists 2 x 1 MiB
# of values.
BEGIN {
  rows = 256; cols = 1024; per_row = 16
  printf "{\"name\": \"load/scatter_elements_1mib\",\n"
  printf " \"source\": \"a 1 MiB float32 input, 16 updates per row along axis 1 (bench/load/make_scatter_case.awk)\",\n"
  printf " \"op\": \"scatter_elements\", \"attrs\": {\"axis\": 1},\n"
  printf " \"inputs\": {\n  \"input\": {\"dtype\": \"float32\", \"sizes\": [%d, %d], \"data\": [", rows, cols
  for (i = 0; i < rows * cols; i++) printf "%s%d", (i ? "," : ""), i % 1000
  printf "]},\n  \"indices\": {\"dtype\": \"int32\", \"sizes\": [%d, %d], \"data\": [", rows, per_row
  for (r = 0; r < rows; r++) {
    for (j = 0; j < per_row; j++) {
      column = (16 * j + 17 * r) % cols
      update[r, column] = -(per_row * r + j + 1)
      printf "%s%d", (r || j ? "," : ""), column
    }
  }
  printf "]},\n  \"updates\": {\"dtype\": \"float32\", \"sizes\": [%d, %d], \"data\": [", rows, per_row
  for (r = 0; r < rows; r++) {
    for (j = 0; j < per_row; j++) printf "%s%d", (r || j ? "," : ""), -(per_row * r + j + 1)
  }
  printf "]}},\n \"expect\": {\"outputs\": [{\"dtype\": \"float32\", \"sizes\": [%d, %d], \"data\": [", rows, cols
  for (r = 0; r < rows; r++) {
    for (c = 0; c < cols; c++) {
      value = ((r, c) in update) ? update[r, c] : (r * cols + c) % 1000
      printf "%s%d", (r || c ? "," : ""), value
    }
  }
  printf "]}]}}\n"
}
