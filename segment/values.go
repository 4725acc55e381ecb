package segment

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"pushfan/repository"
	"pushfan/segment/filter"
)

// MaxValues is how many values of a field Values answers: a builder's
// list, not a report.
const MaxValues = 50

// Values are the values present for one field, as GET
// /push/segments/values answers them: the most common first, each with
// its targets' tokens. Sampled is true when they come from the sample the
// preview's estimate reads (repository.SegmentFieldValues: how it is made
// and what it costs), and the counts are scaled from it.
type Values struct {
	Field   string  `json:"field"`
	Values  []Value `json:"values"`
	Sampled bool    `json:"sampled"`
}

// Value is one value of a field and how many tokens of the audience have
// it.
type Value struct {
	Value  string `json:"value"`
	Tokens int64  `json:"tokens"`
}

// Values reads the values present for the field named field, so that a
// builder offers what the data has (the locales the users have) rather
// than a fixed list. A field that is not one of the schema's, or whose
// kind has no values to suggest (int, date, time), is a *FieldError
// naming field.
func (c *Catalog) Values(ctx context.Context, field string) (Values, error) {
	if err := CheckValuesField(field, c.Fields()); err != nil {
		return Values{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.DBTimeout)
	defer cancel()
	vs, sampled, err := c.store.SegmentFieldValues(ctx, field, MaxValues)
	if err != nil {
		return Values{}, fmt.Errorf("values of %s: %w", field, err)
	}
	out := Values{Field: field, Values: make([]Value, len(vs)), Sampled: sampled}
	for i, v := range vs {
		out.Values[i] = Value{Value: v.Value, Tokens: v.Tokens}
	}
	return out, nil
}

// CheckValuesField refuses a field Values cannot answer, naming field:
// none, one the schema lacks, or one whose kind has no values to
// suggest. Exported for the API's contract tests.
func CheckValuesField(field string, fields filter.Fields) error {
	var some []string
	for _, name := range fields.Names() {
		if repository.Suggestible(fields[name].Kind) {
			some = append(some, name)
		}
	}
	list := strings.Join(some, ", ")
	f, ok := fields[field]
	switch {
	case field == "":
		return refuse("field", "missing_field", "field is required: one of %s", list)
	case !ok:
		return refuse("field", "invalid_field", "%s is not a field of this deployment; values are suggested for %s", strconv.Quote(clip(field)), list)
	case !repository.Suggestible(f.Kind):
		return refuse("field", "invalid_field", "%s is a field of kind %s, which has no values to suggest; values are suggested for %s", field, f.Kind, list)
	}
	return nil
}
