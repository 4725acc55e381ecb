package sqldb

import "strings"

// KeyAfter is the condition "the key columns cols come after last" (a
// keyset page's start) in the form MySQL's range optimizer reads, which a
// row comparison (c1, c2) > (?, ?) is not:
// c1 > ? OR c1 = ? AND c2 > ? ...
func KeyAfter(cols []string, last []any) (string, []any) {
	ors := make([]string, 0, len(cols))
	var args []any
	for i := range cols {
		ands := make([]string, 0, i+1)
		for j := range i {
			ands = append(ands, cols[j]+" = ?")
			args = append(args, last[j])
		}
		ands = append(ands, cols[i]+" > ?")
		args = append(args, last[i])
		ors = append(ors, strings.Join(ands, " AND "))
	}
	return "(" + strings.Join(ors, " OR ") + ")", args
}
