# frozen_string_literal: true

# A Sinatra app with a few routes and an ERB template: a framework's
# per-request cost on top of the server's. The suite requests /items/42,
# and /search with 20 parameters in the query or a form (the
# parameter-heavy workloads).
require "sinatra/base"

class BenchApp < Sinatra::Base
  set :environment, :production
  set :logging, false
  set :views, File.join(__dir__, "views")

  get("/") { "Hello, World!\n" }
  get("/health") { "ok\n" }
  get "/items/:id" do
    @id = Integer(params[:id])
    @items = Array.new(10) { |i| { name: "item #{@id}-#{i}", price: (i * 3.5).round(2) } }
    erb :items
  end
  post("/items") { status 201 }
  search = ->(params) { "#{params.size} params: #{params['q']}, #{params.dig('filter', 'tags')&.size} tags\n" }
  get("/search") { search.call(params) }
  post("/search") { search.call(params) }
end

run BenchApp
