module fairgate.dev/go/fairgate

go 1.19
