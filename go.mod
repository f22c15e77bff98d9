module github.com/redstream-go/redstream

go 1.26

require github.com/redis/rueidis v1.0.79

require (
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/sys v0.47.0 // indirect
)
