// The reference reader for scripts/yaml-suite.sh: what kubectl reads.
// kubectl (k8s.io/apimachinery/pkg/util/yaml, sigs.k8s.io/yaml) decodes
// each document with go-yaml v2's non-strict Unmarshal into interface{},
// then converts it to JSON: maps with non-string keys get their keys as
// text, later duplicate keys win. This does the same per file and prints
// one JSON line: {"ok": [documents]} (null documents dropped) or
// {"error": "message"}.
//
// Built offline against Debian's golang-gopkg-yaml.v2-dev:
//   GOPATH=/usr/share/gocode GO111MODULE=off go build -o goyaml goyaml.go
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	yaml "gopkg.in/yaml.v2"
)

func convert(v interface{}) (interface{}, error) {
	switch t := v.(type) {
	case map[interface{}]interface{}:
		out := make(map[string]interface{}, len(t))
		for k, val := range t {
			c, err := convert(val)
			if err != nil {
				return nil, err
			}
			switch key := k.(type) {
			case string:
				out[key] = c
			case nil:
				out["null"] = c
			case bool, int, int64, uint64, float64:
				out[fmt.Sprint(key)] = c
			default:
				return nil, fmt.Errorf("unsupported map key %#v", k)
			}
		}
		return out, nil
	case []interface{}:
		out := make([]interface{}, len(t))
		for i, val := range t {
			c, err := convert(val)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	default:
		return v, nil
	}
}

func main() {
	text, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Println(`{"error":"unreadable"}`)
		return
	}
	dec := yaml.NewDecoder(bytes.NewReader(text))
	docs := []interface{}{}
	for {
		var v interface{}
		err := dec.Decode(&v)
		if err == io.EOF {
			break
		}
		if err == nil {
			v, err = convert(v)
		}
		if err != nil {
			out, _ := json.Marshal(map[string]string{"error": err.Error()})
			fmt.Println(string(out))
			return
		}
		if v != nil {
			docs = append(docs, v)
		}
	}
	out, err := json.Marshal(map[string]interface{}{"ok": docs})
	if err != nil {
		out, _ = json.Marshal(map[string]string{"error": "to JSON: " + err.Error()})
	}
	fmt.Println(string(out))
}
