package rules

import (
	"errors"
	"strings"
	"testing"
	"time"

	"pushfan/audience"
	"pushfan/model"
)

func adRules(t *testing.T) Rules {
	return Rules{
		Caps: CapRules{Default: "3/day", Named: map[string]string{"marketing": "1/day"}},
		Categories: CategoryRules{
			List: map[string]model.Category{
				"advertising": {Name: "advertising", Consent: model.ConsentTable, TitlePrefix: "(광고) ", BodySuffix: "\n수신거부: 설정",
					Night:        &model.NightRule{Window: model.QuietHours{Start: "21:00", End: "08:00"}, Consent: model.ConsentTable},
					FrequencyCap: "marketing", QuietHours: &model.QuietHours{Start: "22:00", End: "07:00"}},
				"service": {Name: "service"},
			},
		},
		Named: namedSet(t, audience.Definition{Name: "shoppers", Category: "advertising"}),
	}
}

// fieldOf is the field a *FieldError names ("" for another error).
func fieldOf(err error) string {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe.Field
	}
	return ""
}

// Which category a request is in: its own, its named audience's, the
// default; and the 400s naming category.
func TestTheCategoryOfARequest(t *testing.T) {
	r := adRules(t)
	withDefault := adRules(t)
	withDefault.Categories.Default = "service"
	none := Rules{}
	named := func(n string) *AudienceSpec { return &AudienceSpec{Name: n} }
	for _, tc := range []struct {
		name    string
		r       Rules
		spec    Spec
		want    string // "" with wantErr: a 400 naming category
		wantErr bool
	}{
		{"named", r, Spec{Category: "service"}, "service", false},
		{"none named, no default", r, Spec{}, "", true},
		{"none named, the default", withDefault, Spec{}, "service", false},
		{"unknown", r, Spec{Category: "promo"}, "", true},
		{"the audience's", withDefault, Spec{Audience: named("shoppers")}, "advertising", false},
		{"the audience's named again", r, Spec{Category: "advertising", Audience: named("shoppers")}, "advertising", false},
		{"another than the audience's", r, Spec{Category: "service", Audience: named("shoppers")}, "", true},
		{"none configured", none, Spec{}, "", false},
		{"one named with none configured", none, Spec{Category: "service"}, "", true},
	} {
		cat, err := tc.r.category(tc.spec)
		switch {
		case tc.wantErr:
			if fieldOf(err) != "category" {
				t.Errorf("%s: %v, want a 400 naming category", tc.name, err)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want == "" && cat != nil, tc.want != "" && (cat == nil || cat.Name != tc.want):
			t.Errorf("%s: %+v, want %q", tc.name, cat, tc.want)
		}
	}
}

// The labels go on every title and body a phone shows, after the
// templates: a templated title renders with the prefix as written (a
// {{ in it could never be read as a template), a static one stays
// static. A label already there is not added twice.
func TestLabelsGoOnEveryTitleAndBody(t *testing.T) {
	cat := adRules(t).Categories.List["advertising"]
	spec := Spec{
		Title: "Hi {{.name}}", Body: "static body",
		Localized: map[string]model.Localized{"en": {Title: "Sale", Body: "{{.name}}, 20% off"}},
	}
	got, err := labeled(spec, &cat)
	if err != nil {
		t.Fatal(err)
	}
	if got.Body != "static body\n수신거부: 설정" || got.Localized["en"].Title != "(광고) Sale" {
		t.Fatalf("static parts: %q, %q", got.Body, got.Localized["en"].Title)
	}
	if spec.Localized["en"].Title != "Sale" {
		t.Fatal("the request's own map was changed")
	}
	for _, m := range []struct{ title, body, wantTitle, wantBody string }{
		{got.Title, got.Body, "(광고) Hi Kim", "static body\n수신거부: 설정"},
		{got.Localized["en"].Title, got.Localized["en"].Body, "(광고) Sale", "Kim, 20% off\n수신거부: 설정"},
	} {
		tmpl, err := audience.ParseTemplate(m.title, m.body, nil, nil)
		if err != nil {
			t.Fatalf("%q: %v", m.title, err)
		}
		title, body, _, err := tmpl.Render(map[string]string{"name": "Kim"})
		if err != nil || title != m.wantTitle || body != m.wantBody {
			t.Fatalf("rendered %q / %q (%v), want %q / %q", title, body, err, m.wantTitle, m.wantBody)
		}
	}
	if again, _ := labeled(got, &cat); again.Title != got.Title || again.Body != got.Body || again.Localized["en"] != got.Localized["en"] {
		t.Fatalf("labeled twice: %q / %q", again.Title, again.Body)
	}
	if already, _ := labeled(Spec{Title: "(광고) Sale", Body: "b\n수신거부: 설정"}, &cat); already.Title != "(광고) Sale" || already.Body != "b\n수신거부: 설정" {
		t.Fatalf("a label the operator wrote was added again: %q / %q", already.Title, already.Body)
	}

	vs, err := labeled(Spec{Variants: []VariantSpec{{Name: "a", Title: "A", Body: "x"}, {Name: "b", Title: "B",
		Localized: map[string]model.Localized{"ko": {Title: "비", Body: "y"}}}}}, &cat)
	if err != nil || vs.Variants[0].Title != "(광고) A" || vs.Variants[1].Body != "수신거부: 설정" || vs.Variants[1].Localized["ko"].Title != "(광고) 비" {
		t.Fatalf("variants: %+v (%v)", vs.Variants, err)
	}
}

// The prefix starts what is shown: the body of a message without a
// title; the suffix is the body of one without a body. A message with
// neither (data only) cannot carry the label: a 400.
func TestALabelOnAMessageWithoutTitleOrBody(t *testing.T) {
	cat := adRules(t).Categories.List["advertising"]
	got, err := labeled(Spec{Body: "20% off"}, &cat)
	if err != nil || got.Title != "" || got.Body != "(광고) 20% off\n수신거부: 설정" {
		t.Fatalf("body only: %q / %q (%v)", got.Title, got.Body, err)
	}
	got, err = labeled(Spec{Title: "Sale"}, &cat)
	if err != nil || got.Title != "(광고) Sale" || got.Body != "수신거부: 설정" {
		t.Fatalf("title only: %q / %q (%v)", got.Title, got.Body, err)
	}
	if again, _ := labeled(got, &cat); again.Body != got.Body || again.Title != got.Title {
		t.Fatalf("labeled twice: %q / %q", again.Title, again.Body)
	}
	if _, err := labeled(Spec{Data: map[string]string{"k": "v"}}, &cat); fieldOf(err) != "title" {
		t.Fatalf("data only: %v, want a 400 naming title", err)
	}
	if _, err := labeled(Spec{Variants: []VariantSpec{{Name: "a", Title: "A"}, {Name: "b", Data: map[string]string{"k": "v"}}}}, &cat); fieldOf(err) != "variants[1].title" {
		t.Fatalf("a data-only variant: %v, want a 400 naming variants[1].title", err)
	}
	service := adRules(t).Categories.List["service"]
	if _, err := labeled(Spec{Data: map[string]string{"k": "v"}}, &service); err != nil {
		t.Fatalf("data only in a category without labels: %v", err)
	}
}

// A platform override that would replace a labeled title or body on a
// device is a 400 naming its path.
func TestAnOverrideCannotHideTheLabel(t *testing.T) {
	cat := adRules(t).Categories.List["advertising"]
	for _, tc := range []struct {
		spec  Spec
		field string
	}{
		{Spec{Android: []byte(`{"notification":{"title":"x"}}`)}, "android.notification.title"},
		{Spec{Android: []byte(`{"notification":{"body_loc_key":"k"}}`)}, "android.notification.body_loc_key"},
		{Spec{APNS: []byte(`{"payload":{"aps":{"alert":"x"}}}`)}, "apns.payload.aps.alert"},
		{Spec{Webpush: []byte(`{"notification":{"body":"x"}}`)}, "webpush.notification.body"},
		{Spec{Variants: []VariantSpec{{Name: "a", Title: "A"}, {Name: "b", Title: "B", Webpush: []byte(`{"notification":{"title":"x"}}`)}}}, "variants[1].webpush.notification.title"},
	} {
		if _, err := labeled(tc.spec, &cat); fieldOf(err) != tc.field {
			t.Errorf("%s: %v, want a 400 naming it", tc.field, err)
		}
	}
	ok := Spec{Title: "t", Android: []byte(`{"notification":{"channel_id":"ads"}}`), APNS: []byte(`{"payload":{"aps":{"content-available":1}}}`)}
	if _, err := labeled(ok, &cat); err != nil {
		t.Fatalf("overrides that show no title or body: %v", err)
	}
	service := adRules(t).Categories.List["service"]
	if _, err := labeled(Spec{Android: []byte(`{"notification":{"title":"x"}}`)}, &service); err != nil {
		t.Fatalf("a category without labels: %v", err)
	}
}

// A validated request carries its category's rules whole (the proof it
// is stored with), its night window in the local delivery, the category's
// cap and quiet hours unless the request chose, and the labeled message,
// whose size counts the labels.
func TestAValidatedRequestCarriesItsCategory(t *testing.T) {
	r := adRules(t)
	req, err := r.Validate(Spec{Title: "Sale", Body: "b", Category: "advertising", Audience: &AudienceSpec{All: true}}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if req.Category == nil || req.Category.Name != "advertising" || req.Category.Night == nil {
		t.Fatalf("category: %+v", req.Category)
	}
	l := req.Audience.Local
	if l == nil || l.Night == nil || *l.Night != (model.QuietHours{Start: "21:00", End: "08:00"}) || l.QuietHours == nil || l.QuietHours.Start != "22:00" {
		t.Fatalf("local delivery: %+v", l)
	}
	if req.Message.Title != "(광고) Sale" || req.Message.Body != "b\n수신거부: 설정" || req.FrequencyCap != "1/day" {
		t.Fatalf("message %q / %q, cap %q", req.Message.Title, req.Message.Body, req.FrequencyCap)
	}
	off, err := r.Validate(Spec{Title: "Sale", Category: "advertising", Audience: &AudienceSpec{All: true}, QuietHours: QuietHoursSpec{Off: true}}, time.Time{})
	if err != nil || off.Audience.Local == nil || off.Audience.Local.QuietHours != nil || off.Audience.Local.Night == nil {
		t.Fatalf("quiet hours off: %+v (%v); the night window stays (it is the law, not a preference)", off.Audience.Local, err)
	}
	svc, err := r.Validate(Spec{Title: "Down tonight", Category: "service", Audience: &AudienceSpec{All: true}}, time.Time{})
	if err != nil || svc.Audience.Local != nil || svc.Message.Title != "Down tonight" || svc.FrequencyCap != "3/day" {
		t.Fatalf("service: %+v %q %q (%v)", svc.Audience.Local, svc.Message.Title, svc.FrequencyCap, err)
	}
	// A body that fits alone and not with the suffix: the size error.
	long := strings.Repeat("x", MaxPayloadBytes-600) // about 390 bytes of the payload are the message's other parts
	if _, err := r.Validate(Spec{Title: "t", Body: long, Category: "service", Audience: &AudienceSpec{All: true}}, time.Time{}); err != nil {
		t.Fatalf("the body alone: %v", err)
	}
	big := Rules{Categories: CategoryRules{List: map[string]model.Category{"ad": {Name: "ad", BodySuffix: strings.Repeat("y", 250)}}}}
	if _, err := big.Validate(Spec{Title: "t", Body: long, Category: "ad", Audience: &AudienceSpec{All: true}}, time.Time{}); err == nil {
		t.Fatal("a message over FCM's limit with its label was accepted")
	}
}
