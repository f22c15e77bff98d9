package httpidem_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/redstream-go/redstream/httpidem"
	"github.com/redstream-go/redstream/idempotency"
)

func ExampleMiddleware() {
	// In production: idempotency.NewRedis(client, idempotency.Options{Name: "payments"}).
	keys, err := idempotency.NewMemory(idempotency.Options{Name: "payments"})
	if err != nil {
		panic(err)
	}
	mw, err := httpidem.New(httpidem.Options{
		Idempotent: keys,
		Principal:  func(r *http.Request) string { return r.Header.Get("X-Account") }, // your authenticated caller
		Required:   true,
	})
	if err != nil {
		panic(err)
	}
	charges := 0
	pay := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		charges++
		w.Header().Set("Location", fmt.Sprintf("/payments/%d", charges))
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "charged 10 EUR")
	})
	srv := httptest.NewServer(mw.Wrap(pay)) // in a program: http.ListenAndServe(addr, mw.Wrap(mux))
	defer srv.Close()

	post := func(key, body string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/payments", strings.NewReader(body))
		req.Header.Set("X-Account", "acct-42")
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d %s %s\n", resp.StatusCode, resp.Header.Get("Location"), strings.TrimSpace(string(b)))
	}
	post(`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, "amount=10") // runs the handler
	post(`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, "amount=10") // a retry: the stored response
	post(`"8e03978e-40d5-43e8-bc93-6894a57f9324"`, "amount=99") // another payload: 422
	post("", "amount=10")                                       // no key: 400
	fmt.Println("charges:", charges)
	// Output:
	// 201 /payments/1 charged 10 EUR
	// 201 /payments/1 charged 10 EUR
	// 422  {"title":"Idempotency-Key is already used","status":422,"detail":"This operation is idempotent and it requires correct usage of Idempotency Key. Idempotency Key MUST not be reused across different payloads of this operation."}
	// 400  {"title":"Idempotency-Key is missing","status":400,"detail":"This operation is idempotent and it requires correct usage of Idempotency Key."}
	// charges: 1
}
