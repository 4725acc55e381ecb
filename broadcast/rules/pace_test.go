package rules

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"pushfan/model"
)

var rules = Rules{MaxUserIDs: 10000, Horizon: time.Hour, RateLimit: 9900, TransactionalUsers: 100}

func users(n int) *AudienceSpec {
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = uint64(i + 1)
	}
	return &AudienceSpec{UserIDs: ids}
}

func ptr[T any](v T) *T { return &v }

func TestClassAndPaceRules(t *testing.T) {
	all := &AudienceSpec{All: true}
	for _, tc := range []struct {
		name  string
		spec  Spec
		class string
		rate  float64
		over  time.Duration
	}{
		{"a few users are transactional", Spec{Audience: users(3)}, model.ClassTransactional, 0, 0},
		{"up to PUSHFAN_TRANSACTIONAL_USERS", Spec{Audience: users(100)}, model.ClassTransactional, 0, 0},
		{"more users are bulk", Spec{Audience: users(101)}, model.ClassBulk, 0, 0},
		{"everyone is bulk", Spec{Audience: all}, model.ClassBulk, 0, 0},
		{"a class named wins", Spec{Audience: users(3), Class: "bulk"}, model.ClassBulk, 0, 0},
		{"a big transactional send is allowed", Spec{Audience: all, Class: "transactional"}, model.ClassTransactional, 0, 0},
		{"a paced small send is bulk", Spec{Audience: users(3), MaxRate: ptr(5.0)}, model.ClassBulk, 5, 0},
		{"max_rate up to the budget", Spec{Audience: all, MaxRate: ptr(9900.0)}, model.ClassBulk, 9900, 0},
		{"deliver_over", Spec{Audience: all, DeliverOver: "30m"}, model.ClassBulk, 0, 30 * time.Minute},
		{"both", Spec{Audience: users(500), DeliverOver: "10s", MaxRate: ptr(50.0)}, model.ClassBulk, 50, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.spec.Title = "t"
			req, err := rules.Validate(tc.spec, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if req.Class != tc.class || req.MaxRate != tc.rate || req.DeliverOver != tc.over {
				t.Fatalf("class %q max_rate %v deliver_over %v, want %q %v %v", req.Class, req.MaxRate, req.DeliverOver, tc.class, tc.rate, tc.over)
			}
		})
	}
}

func TestBadClassOrPaceNamesTheField(t *testing.T) {
	all := &AudienceSpec{All: true}
	for _, tc := range []struct {
		spec        Spec
		code, field string
	}{
		{Spec{Audience: all, Class: "high"}, "invalid_value", "class"},
		{Spec{Audience: all, Class: "TRANSACTIONAL"}, "invalid_value", "class"},
		{Spec{Audience: all, MaxRate: ptr(0.0)}, "invalid_value", "max_rate"},
		{Spec{Audience: all, MaxRate: ptr(-5.0)}, "invalid_value", "max_rate"},
		{Spec{Audience: all, MaxRate: ptr(9901.0)}, "max_rate_over_budget", "max_rate"},
		{Spec{Audience: all, DeliverOver: "soon"}, "invalid_value", "deliver_over"},
		{Spec{Audience: all, DeliverOver: "1800"}, "invalid_value", "deliver_over"},
		{Spec{Audience: all, DeliverOver: "500ms"}, "invalid_value", "deliver_over"},
		{Spec{Audience: all, DeliverOver: "-1m"}, "invalid_value", "deliver_over"},
		{Spec{Audience: all, DeliverOver: "169h"}, "invalid_value", "deliver_over"},
		{Spec{Audience: users(10000), DeliverOver: "1s"}, "deliver_over_too_short", "deliver_over"},
		{Spec{Audience: users(1000), DeliverOver: "10s", MaxRate: ptr(10.0)}, "deliver_over_too_short", "deliver_over"},
		{Spec{Audience: users(3), Class: "transactional", MaxRate: ptr(10.0)}, "invalid_value", "class"},
		{Spec{Audience: users(3), Class: "transactional", DeliverOver: "1m"}, "invalid_value", "class"},
	} {
		t.Run(fmt.Sprintf("%s=%s", tc.field, tc.spec.Class+tc.spec.DeliverOver), func(t *testing.T) {
			tc.spec.Title = "t"
			_, err := rules.Validate(tc.spec, time.Now())
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Code != tc.code || fe.Field != tc.field || fe.Message == "" {
				t.Fatalf("Validate = %v, want %s on %s", err, tc.code, tc.field)
			}
		})
	}
}
