package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// faulty serves the token endpoint through next and, when a fault is set,
// alters the ID token of that one answer.
func (s *store) faulty(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fault := s.takeFault()
		if fault == "" {
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if rec.Code == http.StatusOK {
			if altered, err := s.alter(body, fault); err == nil {
				body = altered
			} else {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	})
}

// alter rewrites the id_token of a token answer as fault says.
func (s *store) alter(body []byte, fault string) ([]byte, error) {
	var answer map[string]any
	if err := json.Unmarshal(body, &answer); err != nil {
		return nil, fmt.Errorf("token answer: %w", err)
	}
	raw, _ := answer["id_token"].(string)
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("the token answer has no JWT id_token")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, fmt.Errorf("id_token payload: %w", err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		return nil, fmt.Errorf("id_token claims: %w", err)
	}
	switch fault {
	case "tamper":
		// A changed claim under the provider's real signature: what an
		// attacker who cannot sign would try.
		claims["groups"] = []string{"push-admins"}
		claims["email"] = "mallory@example.com"
		changed, _ := json.Marshal(claims)
		parts[1] = base64.RawURLEncoding.EncodeToString(changed)
		answer["id_token"] = strings.Join(parts, ".")
	default:
		switch fault {
		case "aud":
			claims["aud"] = []string{"another-client"}
			delete(claims, "azp")
		case "expired":
			claims["exp"] = time.Now().Add(-time.Hour).Unix()
			claims["iat"] = time.Now().Add(-2 * time.Hour).Unix()
		case "nonce":
			delete(claims, "nonce")
		}
		signed, err := s.sign(claims)
		if err != nil {
			return nil, err
		}
		answer["id_token"] = signed
	}
	var out bytes.Buffer
	if err := json.NewEncoder(&out).Encode(answer); err != nil {
		return nil, fmt.Errorf("token answer: %w", err)
	}
	return out.Bytes(), nil
}

// sign signs claims with the provider's current key, as it signs its own
// ID tokens: the faults other than tamper are tokens the provider really
// issued, wrong only in what they say.
func (s *store) sign(claims map[string]any) (string, error) {
	k := s.current()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: k.rsa, KeyID: k.id}}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", fmt.Errorf("signer: %w", err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("claims: %w", err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		return "", fmt.Errorf("sign: %w", err)
	}
	return jws.CompactSerialize()
}
